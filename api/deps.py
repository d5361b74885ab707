"""Dependencies, declared once as ``Annotated`` aliases so route signatures read like specifications.

They are ``async`` (they only read ``app.state``): FastAPI runs a sync dependency in its thread pool, one
thread hop each, which cost a sync route two extra hops per request."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from ragnarok.core.settings import Settings
from ragnarok.service.retrieval_service import RerankService, RetrievalService
from ragnarok.stages.generate.service import GenerationService


async def get_app_settings(request: Request) -> Settings:
    return request.app.state.settings


async def get_retrieval(request: Request) -> RetrievalService:
    return request.app.state.retrieval


async def get_reranking(request: Request) -> RerankService:
    return request.app.state.reranking


async def get_generation(request: Request) -> GenerationService:
    return request.app.state.generation


SettingsDep = Annotated[Settings, Depends(get_app_settings)]
RetrievalDep = Annotated[RetrievalService, Depends(get_retrieval)]
GenerationDep = Annotated[GenerationService, Depends(get_generation)]
RerankDep = Annotated[RerankService, Depends(get_reranking)]
