"""What a node's role needs for Session Manager. Pure."""

from __future__ import annotations

from infra.core.iam import Policy, policy


def session_manager_policy(log_group_arn: str) -> Policy:
    """What the SSM agent on a node needs for Session Manager, with session logs to one log group.
    Replaces AmazonSSMManagedInstanceCore (which also allows ssm:GetParameter* on every parameter).

    https://docs.aws.amazon.com/systems-manager/latest/userguide/getting-started-create-iam-instance-profile.html
    """
    return policy(
        {
            "Sid": "SessionManagerChannels",
            "Effect": "Allow",
            "Action": [
                "ssm:UpdateInstanceInformation",
                "ssmmessages:CreateControlChannel",
                "ssmmessages:CreateDataChannel",
                "ssmmessages:OpenControlChannel",
                "ssmmessages:OpenDataChannel",
            ],
            "Resource": "*",  # these actions take no resource: https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonsessionmanagermessagegatewayservice.html
        },
        {
            "Sid": "SessionLogs",
            "Effect": "Allow",
            "Action": ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
            "Resource": [log_group_arn, f"{log_group_arn}:*"],
        },
        {
            "Sid": "SessionLogGroupEncryptionCheck",
            "Effect": "Allow",
            "Action": ["logs:DescribeLogGroups"],
            "Resource": "*",  # DescribeLogGroups has no resource-level permission
        },
    )
