"""Judge prompts are data: one YAML file per prompt in ``ragnarok/judge/prompts/`` with ``version``,
``system``, ``user`` (a ``str.format`` template) and ``retry`` (the reminder sent after a malformed answer).
A prompt's name and version are part of every cached judgment's key."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict

PACKAGED = Path(__file__).parent / "prompts"
Messages = list[dict[str, str]]


class JudgePrompt(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    version: int = 1
    system: str
    user: str
    retry: str

    @property
    def key(self) -> str:
        return f"{self.name}@v{self.version}"

    def messages(self, **fields: object) -> Messages:
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user.format(**fields)}]


@cache
def judge_prompt(name: str) -> JudgePrompt:
    path = PACKAGED / f"{name}.yaml"
    if not path.is_file():
        raise ValueError(f"no judge prompt {name!r} in {PACKAGED}")
    return JudgePrompt.model_validate({"name": name, **yaml.safe_load(path.read_text(encoding="utf-8"))})
