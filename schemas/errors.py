"""Validation errors in the contract's words: Japanese by default (as the Zod error map), English on request.

`translate_errors` turns a pydantic `ValidationError` into a list of `ErrorDetail` (path, message, code).
Messages come from a plain table keyed by the pydantic error type; the contract's own texts are used
wherever the seed gives one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

Language = Literal["ja", "en"]

# type -> (japanese, english); templates are formatted with the error's ctx.
Template = tuple[str, str]
_MESSAGES: dict[str, Template] = {
    # The contract's refinements and enum texts (search-zod-schemas.md §2, §4).
    "weights_sum": ("検索重みの合計は1.0である必要があります", "Search weights must sum to 1.0"),
    "date_range_order": (
        "開始日は終了日以前である必要があります",
        "Start date must be on or before end date",
    ),
    "highlight_offset_order": (
        "開始位置は終了位置より小さい必要があります",
        "Start offset must be less than end offset",
    ),
    "enum_query_type": (
        "クエリタイプは local, global, relationship, hybrid のいずれかである必要があります",
        "Query type must be one of local, global, relationship, hybrid",
    ),
    "enum_search_strategy": (
        "検索戦略は keyword, semantic, graph, hybrid のいずれかである必要があります",
        "Search strategy must be one of keyword, semantic, graph, hybrid",
    ),
    "enum_fusion": (
        "融合方式は score-rrf, rrf のいずれかである必要があります",
        "Fusion must be one of score-rrf, rrf",
    ),
    "enum_search_result_type": (
        "結果タイプは chunk, entity, community のいずれかである必要があります",
        "Result type must be one of chunk, entity, community",
    ),
    "enum_crag_relevance": (
        "CRAG判定は correct, incorrect, ambiguous のいずれかである必要があります",
        "CRAG relevance must be one of correct, incorrect, ambiguous",
    ),
    # The global error map (§3).
    "string_type": ("文字列である必要があります", "Must be a string"),
    "float_type": ("数値である必要があります", "Must be a number"),
    "int_type": ("数値である必要があります", "Must be a number"),
    "bool_type": ("真偽値である必要があります", "Must be a boolean"),
    "string_too_short": (
        "{min_length}文字以上である必要があります",
        "Must be at least {min_length} characters",
    ),
    "string_too_long": (
        "{max_length}文字以下である必要があります",
        "Must be at most {max_length} characters",
    ),
    "greater_than_equal": ("{ge}以上である必要があります", "Must be greater than or equal to {ge}"),
    "less_than_equal": ("{le}以下である必要があります", "Must be less than or equal to {le}"),
    "too_short": ("{min_length}個以上の要素が必要です", "Must contain at least {min_length} item(s)"),
    "too_long": ("{max_length}個以下の要素である必要があります", "Must contain at most {max_length} item(s)"),
    # Beyond the seed's map: the other failures a JSON request can produce.
    "int_from_float": ("整数である必要があります", "Must be an integer"),
    "int_parsing": ("整数である必要があります", "Must be an integer"),
    "float_parsing": ("数値である必要があります", "Must be a number"),
    "finite_number": ("有限の数値である必要があります", "Must be a finite number"),
    "missing": ("必須項目です", "Field required"),
    "extra_forbidden": ("不明なフィールドです", "Unknown field"),
    "list_type": ("配列である必要があります", "Must be an array"),
    "model_type": ("オブジェクトである必要があります", "Must be an object"),
    "model_attributes_type": ("オブジェクトである必要があります", "Must be an object"),
    "dict_type": ("オブジェクトである必要があります", "Must be an object"),
    "datetime_type": ("日付である必要があります", "Must be a date"),
    "datetime_parsing": ("日付の形式が正しくありません (ISO 8601)", "Invalid date (expected ISO 8601)"),
    "datetime_from_date_parsing": (
        "日付の形式が正しくありません (ISO 8601)",
        "Invalid date (expected ISO 8601)",
    ),
    "json_invalid": ("JSONとして解析できません", "Body is not valid JSON"),
    "json_type": ("JSONとして解析できません", "Body is not valid JSON"),
    "blank_text": ("空白以外の文字を含む必要があります", "Must contain a non-whitespace character"),
    "embedding_dimension": (
        "埋め込みの次元は{expected}である必要があります（{actual}が指定されました）",
        "Embedding must have {expected} dimensions (got {actual})",
    ),
    "unsupported_media_type": (
        "Content-Type は application/json である必要があります",
        "Content-Type must be application/json",
    ),
    "unsupported_media_type_documents": (
        "Content-Type は application/json または multipart/form-data（フィールド名 files）である必要があります",
        "Content-Type must be application/json or multipart/form-data (form field `files`)",
    ),
    "body_too_large": (
        "リクエストが大きすぎます（上限 {limit} バイト）",
        "Request body too large (limit {limit} bytes)",
    ),
    "invalid_utf8": ("UTF-8として解析できません", "Body is not valid UTF-8"),
    "unsupported_content_encoding": (
        "Content-Encoding {encoding} には対応していません（gzip または無圧縮）",
        "Content-Encoding {encoding} is not supported (use gzip or none)",
    ),
    "invalid_gzip": ("gzip として展開できません", "Body is not valid gzip"),
    "duplicate_document_id": (
        "リクエスト内でドキュメントIDが重複しています: {id}",
        "Duplicate document id in the request: {id}",
    ),
    "string_pattern_mismatch": ("形式が正しくありません", "Invalid format"),
    "too_many_documents": (
        "1回のリクエストのドキュメントは{limit}件までです",
        "At most {limit} documents per request",
    ),
    "no_files": ("ファイルがありません（フィールド名 files）", "No files (form field `files`)"),
    "date_type": (
        "日付は ISO 8601 形式の文字列である必要があります",
        "A date must be an ISO 8601 string",
    ),
    "rerank_model_not_allowed": (
        "リランクモデルは次のいずれかである必要があります: {allowed}",
        "Rerank model must be one of: {allowed}",
    ),
}
_FALLBACK: Template = ("入力が正しくありません", "Invalid input")


class ErrorDetail(BaseModel):
    """One validation problem: where (JSON pointer-ish dotted path in camelCase), what, and a stable code."""

    path: str
    message: str
    code: str


def message_for(code: str, lang: Language, ctx: Mapping[str, Any] | None = None) -> str:
    """The message for an error code in the given language, formatted with `ctx`."""
    ja, en = _MESSAGES.get(code, _FALLBACK)
    template = ja if lang == "ja" else en
    try:
        return template.format(**_format_ctx(ctx or {}))
    except (KeyError, IndexError, ValueError):
        return template


def _format_ctx(ctx: Mapping[str, Any]) -> dict[str, Any]:
    # 1.0 reads better as 1 in "1以上"; keep real fractions as they are.
    return {k: (int(v) if isinstance(v, float) and v.is_integer() else v) for k, v in ctx.items()}


def _path(loc: Iterable[str | int], to_wire: Callable[[str], str]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        else:
            parts.append(("." if parts else "") + to_wire(item))
    return "".join(parts)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


#: A problem document lists at most this many field errors (and says how many there were in all), so the
#: size of an error body, and the work of writing it, does not grow with the size of a bad request.
MAX_REPORTED_ERRORS = 20


def translate_errors(
    exc: ValidationError,
    lang: Language = "ja",
    prefix: tuple[str | int, ...] = (),
    limit: int = MAX_REPORTED_ERRORS,
) -> list[ErrorDetail]:
    """Translate the first `limit` errors of `exc`; locations are given with camelCase field names."""
    details = []
    for err in exc.errors(include_url=False)[:limit]:
        loc = tuple(prefix) + tuple(
            # Literal/function validators add their own loc segments (e.g. "function-wrap[...]").
            part
            for part in err["loc"]
            if not (isinstance(part, str) and ("[" in part or part.startswith("function-")))
        )
        code = err["type"]
        if code == "int_type" and isinstance(err.get("input"), float):
            code = "int_from_float"
        details.append(
            ErrorDetail(path=_path(loc, _camel), message=message_for(code, lang, err.get("ctx")), code=code)
        )
    return details


def pick_language(accept_language: str | None) -> Language:
    """Japanese unless the Accept-Language header prefers English (the contract's default is Japanese)."""
    if not accept_language:
        return "ja"
    best: tuple[float, Language] = (-1.0, "ja")
    for part in accept_language.split(","):
        tag, _, params = part.strip().partition(";")
        q = 1.0
        if params.strip().startswith("q="):
            try:
                q = float(params.strip()[2:])
            except ValueError:
                q = 0.0
        primary = tag.strip().lower().split("-")[0]
        if primary in ("ja", "en") and q > best[0]:
            best = (q, "ja" if primary == "ja" else "en")
    return best[1]
