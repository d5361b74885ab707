"""The app factory: ``create_app(settings)`` builds the API with its state; nothing happens at import time."""

from __future__ import annotations

from fastapi import FastAPI

from api.errors import install_error_handlers
from api.routes import health, retrieve
from ragnarok.retrieve.service import RetrievalService
from ragnarok.settings import Settings, get_settings


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    app = FastAPI(
        title="ragnarok",
        version="0.1.0",
        summary="Retrieval (R) for TREC RAG-style pipelines: BM25, Rocchio and RM3 over Lucene.",
    )
    app.state.settings = settings
    app.state.retrieval = RetrievalService(settings)
    install_error_handlers(app)
    app.include_router(health.router)
    app.include_router(retrieve.router)
    return app
