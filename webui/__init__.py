"""The Gradio arena: blinded and side-by-side battles between RAG pipelines, votes, leaderboards.

``webui.app.mount(app, settings)`` serves it inside the API at ``/arena``; ``python -m webui --rag-url URL``
serves it alone against a running gateway. Importing this package imports neither Gradio nor anything heavy.
It sits below ``api``, which mounts it, and may import the tools, the stores, the stages, core and runtime.
"""
