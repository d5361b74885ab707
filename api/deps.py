"""Dependencies, declared once as ``Annotated`` aliases so route signatures read like specifications."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from ragnarok.generate.service import GenerationService
from ragnarok.retrieve.service import RerankService, RetrievalService
from ragnarok.settings import Settings


def get_app_settings(request: Request) -> Settings:
    return request.app.state.settings


def get_retrieval(request: Request) -> RetrievalService:
    return request.app.state.retrieval


def get_reranking(request: Request) -> RerankService:
    return request.app.state.reranking


def get_generation(request: Request) -> GenerationService:
    return request.app.state.generation


SettingsDep = Annotated[Settings, Depends(get_app_settings)]
RetrievalDep = Annotated[RetrievalService, Depends(get_retrieval)]
GenerationDep = Annotated[GenerationService, Depends(get_generation)]
RerankDep = Annotated[RerankService, Depends(get_reranking)]
