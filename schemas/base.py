"""Shared base model and reusable field types for the search contract.

The wire format is camelCase exactly as in the Zod contract; Python attributes are snake_case and both
spellings are accepted on input. Unknown fields are rejected (Zod objects are strict in our use), and
numbers must be finite (JSON has no NaN/Infinity, and a NaN weight must never reach the fusion code).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, WrapValidator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

SCHEMA_VERSION = "1.0.0"
SCHEMA_RELEASE_DATE = "2025-12-18"


class ContractModel(BaseModel):
    """Base of every contract model: camelCase aliases, strict unknown-field handling, finite numbers."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="forbid",
        strict=True,
        allow_inf_nan=False,
        frozen=False,
    )

    def to_wire(self, exclude_unset: bool = False) -> dict[str, Any]:
        """Serialise to the camelCase JSON-compatible dict that goes on the wire.

        `exclude_unset` keeps only the fields the caller set: a client must not turn the contract's defaults
        into explicit choices (explicit weights, for one, override the classifier's suggestion).
        """
        return self.model_dump(mode="json", by_alias=True, exclude_unset=exclude_unset)


T = TypeVar("T")


def _integral_number(value: Any) -> Any:
    """JSON, like JavaScript, has one number type: a caller in JavaScript cannot tell 10.0 from 10, and Zod's
    `int()` accepts both. An integral float is that integer; 10.5, strings and booleans stay errors."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


#: Put after an integer field's constraints (`Annotated[int, Field(ge=1), INTEGRAL]`, so the JSON Schema keeps
#: its minimum and maximum): integral floats (10.0) are accepted as integers, as Zod accepts them.
INTEGRAL = BeforeValidator(_integral_number)


def _enum_error(code: str) -> WrapValidator:
    """Re-raise a Literal mismatch as a named error, so the message can be the contract's own text."""

    def validate(value: Any, handler: Any) -> Any:
        try:
            return handler(value)
        except ValidationError as exc:
            raise PydanticCustomError(code, "invalid enum value: {value}", {"value": repr(value)}) from exc

    return WrapValidator(validate)


QueryTypeName = Literal["local", "global", "relationship", "hybrid"]
SearchStrategyName = Literal["keyword", "semantic", "graph", "hybrid"]
QueryType = Annotated[QueryTypeName, _enum_error("enum_query_type")]
SearchStrategy = Annotated[SearchStrategyName, _enum_error("enum_search_strategy")]
SearchResultType = Annotated[Literal["chunk", "entity", "community"], _enum_error("enum_search_result_type")]
CragRelevance = Annotated[Literal["correct", "incorrect", "ambiguous"], _enum_error("enum_crag_relevance")]
