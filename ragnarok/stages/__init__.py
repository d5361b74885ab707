"""The pipeline's stages by role (``retrieve``, ``rerank``, ``query``, ``passage``, ``generate``,
``embed``) and ``components``, the registry entries that make each one by name. Stages import only core and
runtime; inside, ``rerank | query | passage`` may use ``generate | retrieve``, which may use ``embed``."""
