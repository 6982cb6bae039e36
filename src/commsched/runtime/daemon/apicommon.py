"""What every route of the daemon's HTTP API shares: the token, the strict JSON body, the error shape.

Every error the API answers has one shape, ``{"error": ONE LINE, "field": WHERE}``: a refused token
(401), a value the service refuses (400, 404, 409), and what :mod:`commsched.runtime.http.strictjson` answers
for every JSON service of the runtime (a malformed body, a bad parameter, an unknown route: 404, 405,
422). Bodies are read strictly (:class:`~commsched.runtime.http.strictjson.StrictJSONRoute`: no key twice),
and the models of :mod:`.models` take no coercion (``"gpus": true`` or ``"gpus": "8"`` is not a GPU
count).
"""

from __future__ import annotations

import secrets
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from commsched.errors import InputError
from commsched.runtime.daemon.jobrequest import StateConflictError, UnknownJobError
from commsched.runtime.http.strictjson import add_shape_handlers

__all__ = ["UnauthorizedError", "add_error_handlers", "token_guards"]

_LOOPBACK = {"127.0.0.1", "::1", "localhost", "testclient"}
_bearer = HTTPBearer(auto_error=False)


class UnauthorizedError(Exception):
    """A mutating call (or a read from another host) without the daemon's bearer token."""


def token_guards(token: str) -> tuple[list[Any], list[Any]]:
    """The ``dependencies`` of read routes and of mutating routes, for ``token``."""

    async def need_token(cred: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> None:
        if cred is None or not secrets.compare_digest(cred.credentials.encode(), token.encode()):
            raise UnauthorizedError

    async def may_read(request: Request) -> None:
        # reads are open on loopback; the header is parsed only for other clients (a read is the hot
        # path, and a sub-dependency costs a measurable share of its time)
        if request.client is None or request.client.host in _LOOPBACK:
            return
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        ok = scheme.lower() == "bearer" and credentials
        await need_token(HTTPAuthorizationCredentials(scheme=scheme, credentials=credentials) if ok else None)

    return [Depends(may_read)], [Depends(need_token)]


def add_error_handlers(app: FastAPI) -> None:
    """Answer every error of ``app`` as ``{"error", "field"}`` (module docstring)."""
    add_shape_handlers(app)

    @app.exception_handler(UnauthorizedError)
    async def _unauth(_r: Request, _e: UnauthorizedError) -> JSONResponse:
        body = {"error": "missing or wrong bearer token", "field": "Authorization"}
        return JSONResponse(body, status_code=401, headers={"WWW-Authenticate": "Bearer"})

    @app.exception_handler(InputError)
    async def _input(_r: Request, e: InputError) -> JSONResponse:
        code = 404 if isinstance(e, UnknownJobError) else 409 if isinstance(e, StateConflictError) else 400
        return JSONResponse({"error": e.line(), "field": e.where}, status_code=code)
