"""NodeSessions: Session Manager access to nodes with every session logged under the logs key.

The node role gets only what the SSM agent needs for Session Manager (``iam.session_manager_policy``),
sessions are logged to a CloudWatch log group encrypted with the logs key, and a Session document of the
stack turns logging on (``aws ssm start-session --target <instance> --document-name <document>``). The
account's default document (SSM-SessionManagerRunShell) is left alone: it is one per account and region
and may already exist.
https://docs.aws.amazon.com/systems-manager/latest/userguide/session-manager-logging.html
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.pools.documents import iam
from infra.resources.aws import fixed_name


def session_document(log_group_name: str) -> dict[str, object]:
    """A Session Manager preferences document that logs every session to ``log_group_name``.

    https://docs.aws.amazon.com/systems-manager/latest/userguide/getting-started-create-preferences-cli.html
    """
    return {
        "schemaVersion": "1.0",
        "description": "Session Manager sessions of the stack's nodes, logged to CloudWatch Logs",
        "sessionType": "Standard_Stream",
        "inputs": {
            "cloudWatchLogGroupName": log_group_name,
            "cloudWatchEncryptionEnabled": True,
            "cloudWatchStreamingEnabled": True,
            "s3BucketName": "",
            "kmsKeyId": "",
            "runAsEnabled": False,
            "idleSessionTimeout": "20",
        },
    }


@dataclass(frozen=True, kw_only=True)
class NodeSessionsArgs:
    """Inputs of NodeSessions; names are decided by the caller."""

    node_role_name: pulumi.Input[str]
    log_group_name: str
    document_name: str
    logs_key_arn: pulumi.Input[str]
    retention_days: int = 365


class NodeSessions(pulumi.ComponentResource):
    """The session log group, the stack's Session document and the node role's Session Manager policy."""

    document_name: pulumi.Output[str]
    log_group_arn: pulumi.Output[str]

    def __init__(self, name: str, args: NodeSessionsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:sessions:NodeSessions", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        group = aws.cloudwatch.LogGroup(
            f"{name}-logs",
            name=args.log_group_name,
            retention_in_days=args.retention_days,
            kms_key_id=args.logs_key_arn,
            opts=fixed_name(child),
        )
        doc = aws.ssm.Document(
            f"{name}-document",
            name=args.document_name,
            document_type="Session",
            document_format="JSON",
            content=json.dumps(session_document(args.log_group_name)),
            opts=fixed_name(child),
        )
        aws.iam.RolePolicy(
            f"{name}-node-policy",
            role=args.node_role_name,
            policy=group.arn.apply(lambda arn: json.dumps(iam.session_manager_policy(arn))),
            opts=child,
        )
        self.document_name = doc.name
        self.log_group_arn = group.arn
        self.register_outputs({"document_name": self.document_name, "log_group_arn": self.log_group_arn})
