"""botocore's Stubber for a few operations of a client, the rest of which talks HTTP to the moto server.

moto 5.2.5 lacks some APIs preflight reads (EC2 DescribeCapacityReservations, Service Quotas for ec2, EKS
DescribeAddonVersions, Account GetRegionOptStatus). ``Stubber`` checks every stubbed response against the
real API model (botocore's service JSON) and, with expected params, the request too; but it answers every
call of the client. ``OperationStubber`` registers Stubber's handlers for the named operations only, so one
client can read moto over HTTP and get validated stub answers for what moto lacks.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from botocore.stub import Stubber


class OperationStubber(Stubber):
    """A Stubber limited to ``operations`` (API names, e.g. ``DescribeCapacityReservations``)."""

    def __init__(self, client: Any, operations: Iterable[str]) -> None:
        super().__init__(client)
        self.operations = tuple(operations)
        model = client.meta.service_model
        unknown = [op for op in self.operations if op not in model.operation_names]
        if unknown:
            raise ValueError(f"{model.service_name} has no operations {unknown}")
        self._service = model.service_id.hyphenize()

    def _events(self) -> list[tuple[str, str, Any, bool]]:
        out = []
        for op in self.operations:
            out.append(
                (
                    f"before-parameter-build.{self._service}.{op}",
                    f"params-{op}",
                    self._assert_expected_params,
                    True,
                )
            )
            out.append((f"before-call.{self._service}.{op}", f"call-{op}", self._get_response_handler, False))
        return out

    def activate(self) -> None:
        for event, uid, handler, first in self._events():
            register = self.client.meta.events.register_first if first else self.client.meta.events.register
            register(event, handler, unique_id=f"op-stubber-{uid}")

    def deactivate(self) -> None:
        for event, uid, handler, _ in self._events():
            self.client.meta.events.unregister(event, handler, unique_id=f"op-stubber-{uid}")
