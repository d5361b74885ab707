"""The generators every installation has: the extractive baseline, the embedded SmolLM2, GPT-4o and Command R+.

:meth:`ragnarok.core.settings.Settings.generator_configs` starts from these and lets the ``generators`` setting
override them by name or add more. Their figures (contexts, prompt budget, answer length) are tuned for the
machine each one runs on: the embedded model's for two CPU cores.
"""

from __future__ import annotations

from ragnarok.core.generator_config import GeneratorConfig


def default_generators(openai_api_key_env: str, cohere_api_key_env: str) -> list[GeneratorConfig]:
    """The default generators, the paid ones reading their keys from the environment variables named."""
    return [
        GeneratorConfig(
            name="extractive",
            backend="extractive",
            model="minilm",
            max_answer_words=150,
            max_contexts=10,
            description="extractive baseline: the candidates' own sentences (MMR over MiniLM), cited",
        ),
        # a 135M model on 2 cores: the top 5 contexts, a prompt of what 4 s of prompt evaluation allow at the
        # measured ~150 tokens/s (bench/bench_generate.py), an answer of at most 80 words (the model stops
        # writing there; max_tokens stays 400 for its other uses: query stages, compression, judging),
        # repetition controls, citations checked and attributed after the fact
        GeneratorConfig(
            name="smollm2",
            backend="llama-cpp",
            model="SmolLM2-135M-Instruct",
            context_tokens=4096,
            max_tokens=400,
            template="small",
            max_contexts=5,
            prompt_tokens_per_s=150,
            prompt_s=4,
            max_answer_words=80,
            repeat_penalty=1.1,
            attribution="check",
            uncited="no_answer",
            description="embedded SmolLM2-135M-Instruct (llama.cpp)",
        ),
        GeneratorConfig(
            name="gpt-4o",
            backend="openai",
            model="gpt-4o",
            api_key_env=openai_api_key_env,
            context_tokens=128_000,
            description="OpenAI GPT-4o",
        ),
        GeneratorConfig(
            name="command-r-plus",
            backend="cohere",
            model="command-r-plus",
            api_key_env=cohere_api_key_env,
            context_tokens=128_000,
            description="Cohere Command R+ with document grounding",
        ),
    ]
