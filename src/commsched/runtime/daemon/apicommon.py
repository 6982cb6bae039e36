"""What every route of the daemon's HTTP API shares: the token, the strict JSON body, the error shape.

Every error the API answers has one shape, ``{"error": ONE LINE, "field": WHERE}`` (a 422 also lists
pydantic's findings under ``detail``): a refused token (401), a value the service refuses (400, 404,
409), a malformed body (422: not JSON, a key given twice, a wrong type, an unknown field) and a route
or method that does not exist (404, 405).

Bodies are read strictly: a JSON object with a key given twice is refused (the standard parser would
keep the last one silently), and the models of :mod:`.models` take no coercion (``"gpus": true`` or
``"gpus": "8"`` is not a GPU count).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from commsched.errors import InputError
from commsched.runtime.daemon.jobs import StateConflictError, UnknownJobError

__all__ = ["BodyError", "StrictJSONRoute", "UnauthorizedError", "add_error_handlers", "token_guards"]

_LOOPBACK = {"127.0.0.1", "::1", "localhost", "testclient"}
_bearer = HTTPBearer(auto_error=False)
_BODY_METHODS = {"POST", "PUT", "PATCH"}


class UnauthorizedError(Exception):
    """A mutating call (or a read from another host) without the daemon's bearer token."""


class BodyError(Exception):
    """A request body that is not a JSON document with distinct keys (answered 422)."""

    def __init__(self, error: str, field: str) -> None:
        super().__init__(error)
        self.error = error
        self.field = field


def _distinct(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` that refuses a key given twice in one JSON object."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise BodyError(f"body: key {key!r} is given twice in one object", f"body.{key}")
        out[key] = value
    return out


def check_body(raw: bytes) -> None:
    """Refuse a body that is not JSON, or that gives a key twice (:class:`BodyError`).

    Examples
    --------
    >>> check_body(b'{"name": "h0", "nics": []}')
    >>> check_body(b'{"name": "h0", "name": "h1"}')
    Traceback (most recent call last):
    ...
    commsched.runtime.daemon.apicommon.BodyError: body: key 'name' is given twice in one object
    """
    try:
        json.loads(raw, object_pairs_hook=_distinct)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        raise BodyError(f"body: not JSON: {exc.msg} ({where})", "body") from None
    except UnicodeDecodeError:
        raise BodyError("body: not UTF-8 text", "body") from None


class StrictJSONRoute(APIRoute):
    """A route whose JSON body is checked by :func:`check_body` before FastAPI parses it."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            if request.method in _BODY_METHODS:
                raw = await request.body()
                if raw.strip():
                    check_body(raw)
            return await handler(request)

        return strict


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


def _field(loc: Any) -> str:
    return ".".join(str(p) for p in loc)


def add_error_handlers(app: FastAPI) -> None:
    """Answer every error of ``app`` as ``{"error", "field"}`` (module docstring)."""

    @app.exception_handler(UnauthorizedError)
    async def _unauth(_r: Request, _e: UnauthorizedError) -> JSONResponse:
        body = {"error": "missing or wrong bearer token", "field": "Authorization"}
        return JSONResponse(body, status_code=401, headers={"WWW-Authenticate": "Bearer"})

    @app.exception_handler(InputError)
    async def _input(_r: Request, e: InputError) -> JSONResponse:
        code = 404 if isinstance(e, UnknownJobError) else 409 if isinstance(e, StateConflictError) else 400
        return JSONResponse({"error": e.line(), "field": e.where}, status_code=code)

    @app.exception_handler(BodyError)
    async def _body(_r: Request, e: BodyError) -> JSONResponse:
        return JSONResponse({"error": e.error, "field": e.field}, status_code=422)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_r: Request, e: RequestValidationError) -> JSONResponse:
        errs = list(e.errors())
        lines = [_field(err.get("loc", ())) + ": " + str(err.get("msg", "")) for err in errs]
        field = _field(errs[0].get("loc", ())) if errs else ""
        detail = [{"loc": list(err.get("loc", ())), "msg": str(err.get("msg", ""))} for err in errs]
        return JSONResponse({"error": "; ".join(lines), "field": field, "detail": detail}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(r: Request, e: StarletteHTTPException) -> JSONResponse:
        field = "method" if e.status_code == 405 else "path"
        body = {"error": f"{r.method} {r.url.path}: {e.detail}", "field": field}
        return JSONResponse(body, status_code=e.status_code, headers=e.headers)
