"""Where the deployer policy can name the stack's resources: the input that holds each type's physical name,
by the IAM resource ARN it fills (``NAME_SCOPES``), and the service-linked roles AWS creates as the caller
(``SERVICE_LINKED_ROLES``). Pure data; ``documents.py`` builds the ARNs from the SAR's formats."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NameScope:
    """A resource type whose physical name fills one variable of an IAM resource ARN (the SAR's
    ``resources`` table of ``service``): ``var`` of ``resource`` comes from input ``input`` (less
    ``strip``); ``autoname``: without that input Pulumi names it ``<logical name>-<random>``."""

    service: str
    resource: str
    var: str
    input: str
    autoname: bool = False
    strip: str = ""


# The input that names each type's resource, by the IAM resource ARN it fills.
NAME_SCOPES: dict[str, NameScope] = {
    "aws:iam/role:Role": NameScope("iam", "role", "RoleNameWithPath", "name", autoname=True),
    "aws:iam/policy:Policy": NameScope("iam", "policy", "PolicyNameWithPath", "name", autoname=True),
    "aws:s3/bucket:Bucket": NameScope("s3", "bucket", "BucketName", "bucket", autoname=True),
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration": NameScope(
        "s3", "bucket", "BucketName", "bucket"
    ),
    "aws:s3/bucketLogging:BucketLogging": NameScope("s3", "bucket", "BucketName", "bucket"),
    "aws:s3/bucketObjectLockConfiguration:BucketObjectLockConfiguration": NameScope(
        "s3", "bucket", "BucketName", "bucket"
    ),
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls": NameScope(
        "s3", "bucket", "BucketName", "bucket"
    ),
    "aws:s3/bucketPolicy:BucketPolicy": NameScope("s3", "bucket", "BucketName", "bucket"),
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": NameScope(
        "s3", "bucket", "BucketName", "bucket"
    ),
    "aws:s3/bucketReplicationConfig:BucketReplicationConfig": NameScope(
        "s3", "bucket", "BucketName", "bucket"
    ),
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": NameScope(
        "s3", "bucket", "BucketName", "bucket"
    ),
    "aws:s3/bucketVersioning:BucketVersioning": NameScope("s3", "bucket", "BucketName", "bucket"),
    "aws:eks/cluster:Cluster": NameScope("eks", "cluster", "ClusterName", "name", autoname=True),
    "aws:eks/nodeGroup:NodeGroup": NameScope("eks", "nodegroup", "ClusterName", "clusterName"),
    "aws:eks/addon:Addon": NameScope("eks", "addon", "ClusterName", "clusterName"),
    "aws:eks/accessEntry:AccessEntry": NameScope("eks", "access-entry", "ClusterName", "clusterName"),
    "aws:cloudwatch/logGroup:LogGroup": NameScope("logs", "log-group", "LogGroupName", "name", autoname=True),
    "aws:cloudwatch/eventRule:EventRule": NameScope(
        "events", "rule-on-default-event-bus", "RuleName", "name", autoname=True
    ),
    "aws:kms/alias:Alias": NameScope("kms", "alias", "Alias", "name", strip="alias/"),
    "aws:ecr/repository:Repository": NameScope("ecr", "repository", "RepositoryName", "name", autoname=True),
    "aws:ecr/lifecyclePolicy:LifecyclePolicy": NameScope("ecr", "repository", "RepositoryName", "repository"),
    "aws:ecr/repositoryPolicy:RepositoryPolicy": NameScope(
        "ecr", "repository", "RepositoryName", "repository"
    ),
    "aws:sns/topic:Topic": NameScope("sns", "topic", "TopicName", "name", autoname=True),
    "aws:sqs/queue:Queue": NameScope("sqs", "queue", "QueueName", "name", autoname=True),
    "aws:ssm/document:Document": NameScope("ssm", "document", "DocumentName", "name"),
    "aws:cloudtrail/trail:Trail": NameScope("cloudtrail", "trail", "TrailName", "name"),
    "aws:wafv2/webAcl:WebAcl": NameScope("wafv2", "webacl", "Name", "name", autoname=True),
    "aws:route53/record:Record": NameScope("route53", "hostedzone", "Id", "zoneId"),
    "aws:ec2/placementGroup:PlacementGroup": NameScope(
        "ec2", "placement-group", "PlacementGroupName", "name", autoname=True
    ),
}

# The service-linked roles AWS creates, as the caller, when a type is first created in an account
# (iam:CreateServiceLinkedRole, granted on aws-service-role/ for these service names only).
SLR = "iam:CreateServiceLinkedRole"
SERVICE_LINKED_ROLES: dict[str, tuple[str, ...]] = {
    # https://docs.aws.amazon.com/eks/latest/userguide/using-service-linked-roles-eks.html
    "aws:eks/cluster:Cluster": ("eks.amazonaws.com",),
    # the node group's and Auto Scaling's roles (docs/deploy.md step 8):
    # https://docs.aws.amazon.com/eks/latest/userguide/using-service-linked-roles-eks-nodegroups.html,
    # https://docs.aws.amazon.com/autoscaling/ec2/userguide/autoscaling-service-linked-role.html
    "aws:eks/nodeGroup:NodeGroup": ("eks-nodegroup.amazonaws.com", "autoscaling.amazonaws.com"),
    # https://docs.aws.amazon.com/AmazonECR/latest/userguide/slr-replication.html
    "aws:ecr/replicationConfiguration:ReplicationConfiguration": ("replication.ecr.amazonaws.com",),
    # https://docs.aws.amazon.com/fsx/latest/LustreGuide/setting-up.html (FSx and its S3 data repository role,
    # which FSx also attaches a policy to as the caller: FSX_S3_ROLE_ACTIONS)
    "aws:fsx/lustreFileSystem:LustreFileSystem": ("fsx.amazonaws.com",),
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": (
        "fsx.amazonaws.com",
        "s3.data-source.lustre.fsx.amazonaws.com",
    ),
}
FSX_S3_ROLE = "aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/*"
FSX_S3_ROLE_ACTIONS = ("iam:AttachRolePolicy", "iam:PutRolePolicy")
