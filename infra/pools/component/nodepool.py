"""GpuNodePool: an EKS managed node group on its own launch template (EFA, placement, capacity)."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from infra.pools.documents.efa import EfaInterface
from infra.pools.documents.nodes import IMDS_HOP_LIMIT, Taint
from infra.resources.aws import fixed_name
from infra.resources.options import child_options


@dataclass(frozen=True, kw_only=True)
class PlacementGroup:
    """The cluster placement group the pool launches into: ``create`` it under ``name`` here, or use an
    existing one (a capacity reservation's own group)."""

    name: str
    create: bool


@dataclass(frozen=True, kw_only=True)
class CapacityReservation:
    """The On-Demand Capacity Reservation or Capacity Block (``capacity_block``) the pool launches into."""

    reservation_id: str
    capacity_block: bool = False


@dataclass(frozen=True, kw_only=True)
class GpuNodePoolArgs:
    """Inputs of GpuNodePool: plain values, derived from the config and AWS facts by the wiring.

    ``capacity_type`` is the EKS API value (``ON_DEMAND``, ``SPOT``, ``CAPACITY_BLOCK``); ``ami_type`` the EKS
    AMI type; ``efa_interfaces`` the launch template's EFA interfaces (empty: no EFA); ``subnet_ids`` the
    private subnets of the pool's zones (one for EFA pools); ``ebs_key_arn`` encrypts the root volume.
    """

    pool_name: str
    node_group_name: str
    launch_template_name: str
    instance_type: str
    ami_type: str
    capacity_type: str
    min_size: int
    desired_size: int
    max_size: int
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    efa_interfaces: tuple[EfaInterface, ...] = ()
    placement_group: PlacementGroup | None = None
    capacity_reservation: CapacityReservation | None = None
    root_volume_gib: int = 100
    user_data: str | None = None
    cluster_name: pulumi.Input[str]
    kubernetes_version: str
    node_role_arn: pulumi.Input[str]
    cluster_security_group_id: pulumi.Input[str]
    vpc_id: pulumi.Input[str]
    subnet_ids: list[pulumi.Input[str]]
    ebs_key_arn: pulumi.Input[str]
    tags: dict[str, str] = field(default_factory=dict)


class GpuNodePool(pulumi.ComponentResource):
    """A managed node group whose launch template gets the details right by construction.

    IMDSv2 only with hop limit 1: a pod in its own network namespace is one hop further and gets no
    IMDSv2 token, so it cannot read the node role's credentials (the EKS default for AL2023 managed nodes;
    host-network pods such as vpc-cni still reach IMDS)
    (https://docs.aws.amazon.com/eks/latest/userguide/al2023.html);
    encrypted gp3 root volume; no SSH key and no public IP; tags on instances, volumes and interfaces.
    EFA pools get every EFA interface the type has (``infra/pools/documents/efa.py``), a self-referencing
    all-traffic security group on each, one subnet, and a cluster placement group unless a capacity
    reservation decides placement (https://docs.aws.amazon.com/eks/latest/userguide/node-efa.html).
    """

    node_group_name: pulumi.Output[str]
    launch_template_id: pulumi.Output[str]
    efa_security_group_id: pulumi.Output[str] | None
    placement_group_name: pulumi.Output[str] | None

    def __init__(self, name: str, args: GpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:nodepool:GpuNodePool", name, None, opts)
        # children repeat the component's depends_on (networking add-ons, node role policies)
        child = child_options(self, opts)
        efa = bool(args.efa_interfaces)
        full_name = args.node_group_name
        tags = {**args.tags, "Name": full_name, "aiplat:pool": args.pool_name}

        security_groups: list[pulumi.Input[str]] = [args.cluster_security_group_id]
        self.efa_security_group_id = None
        if efa:
            # EFA's OS-bypass traffic needs all protocols to and from the same group:
            # https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start.html#efa-start-security
            sg = aws.ec2.SecurityGroup(
                f"{name}-efa-sg",
                vpc_id=args.vpc_id,
                description=f"EFA traffic within node pool {args.pool_name}",
                tags={"Name": f"{full_name}-efa"},
                opts=child,
            )
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-efa-in",
                security_group_id=sg.id,
                referenced_security_group_id=sg.id,
                ip_protocol="-1",
                description="all traffic from the EFA group",
                opts=child,
            )
            aws.vpc.SecurityGroupEgressRule(
                f"{name}-efa-out",
                security_group_id=sg.id,
                referenced_security_group_id=sg.id,
                ip_protocol="-1",
                description="all traffic to the EFA group",
                opts=child,
            )
            self.efa_security_group_id = sg.id
            security_groups.append(sg.id)

        self.placement_group_name = None
        placement = None
        if args.placement_group is not None:
            if args.placement_group.create:
                pg = aws.ec2.PlacementGroup(
                    f"{name}-pg",
                    name=args.placement_group.name,
                    strategy="cluster",
                    tags=tags,
                    opts=fixed_name(child),
                )
                group = pg.name
            else:
                # The reservation's own placement group (made with the reservation, not here).
                group = pulumi.Output.from_input(args.placement_group.name)
            self.placement_group_name = group
            placement = aws.ec2.LaunchTemplatePlacementArgs(group_name=group)

        network_interfaces = None
        vpc_security_group_ids = security_groups
        if efa:
            network_interfaces = [
                aws.ec2.LaunchTemplateNetworkInterfaceArgs(
                    network_card_index=i.network_card_index,
                    device_index=i.device_index,
                    interface_type=i.interface_type,
                    security_groups=security_groups,
                    delete_on_termination="true",
                )
                for i in args.efa_interfaces
            ]
            vpc_security_group_ids = None  # groups go on the interfaces when interfaces are listed

        capacity_spec = None
        market = None
        if args.capacity_reservation is not None:
            capacity_spec = aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
                capacity_reservation_target=aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                    capacity_reservation_id=args.capacity_reservation.reservation_id
                )
            )
            if args.capacity_reservation.capacity_block:
                # https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html
                market = aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(market_type="capacity-block")

        # A Capacity Block node group takes its instance type from the launch template and none on the
        # node group ("InstanceType" is a required launch template value; the create request is rejected
        # otherwise). Other pools keep the type on the node group, where EKS allows 0-20 types.
        # https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html
        # https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateNodegroup.html#AmazonEKS-CreateNodegroup-request-instanceTypes
        type_in_template = args.capacity_reservation is not None and args.capacity_reservation.capacity_block

        user_data = args.user_data
        self.launch_template = aws.ec2.LaunchTemplate(
            f"{name}-lt",
            name=args.launch_template_name,
            description=f"aiplat node pool {args.pool_name} ({args.instance_type})",
            update_default_version=True,
            instance_type=args.instance_type if type_in_template else None,
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled",
                http_tokens="required",
                http_put_response_hop_limit=IMDS_HOP_LIMIT,
            ),
            block_device_mappings=[
                aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                    device_name="/dev/xvda",  # the AL2023 EKS AMIs' root device
                    ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                        volume_size=args.root_volume_gib,
                        volume_type="gp3",
                        encrypted="true",
                        kms_key_id=args.ebs_key_arn,
                        delete_on_termination="true",
                    ),
                )
            ],
            network_interfaces=network_interfaces,
            vpc_security_group_ids=vpc_security_group_ids,
            placement=placement,
            capacity_reservation_specification=capacity_spec,
            instance_market_options=market,
            user_data=base64.b64encode(user_data.encode()).decode() if user_data else None,
            tag_specifications=[
                aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags=tags)
                for kind in ("instance", "volume", "network-interface")
            ],
            tags=tags,
            opts=fixed_name(child),
        )
        self.launch_template_id = self.launch_template.id

        self.node_group = aws.eks.NodeGroup(
            f"{name}-ng",
            cluster_name=args.cluster_name,
            node_group_name=full_name,
            node_role_arn=args.node_role_arn,
            subnet_ids=args.subnet_ids,
            version=args.kubernetes_version,
            ami_type=args.ami_type,
            instance_types=None if type_in_template else [args.instance_type],
            capacity_type=args.capacity_type,
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=args.min_size, desired_size=args.desired_size, max_size=args.max_size
            ),
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                id=self.launch_template.id, version=self.launch_template.latest_version.apply(str)
            ),
            labels=dict(args.labels),
            taints=[
                aws.eks.NodeGroupTaintArgs(key=t.key, value=t.value, effect=t.effect) for t in args.taints
            ],
            # https://docs.aws.amazon.com/eks/latest/userguide/node-health.html
            node_repair_config=aws.eks.NodeGroupNodeRepairConfigArgs(enabled=True),
            update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1),
            tags=tags,
            # desired_size is authoritative: no cluster autoscaler scales managed node groups here (Karpenter
            # launches its own nodes, never these), so every pulumi up applies the config's size. A pool is
            # grown by raising desired_size (or, between deploys, with aws eks update-nodegroup-config, which
            # a later pulumi up --refresh resets). NodegroupScalingConfig: "Whenever this parameter changes,
            # the number of worker nodes in the node group is updated to the specified size."
            # https://docs.aws.amazon.com/eks/latest/APIReference/API_NodegroupScalingConfig.html
            opts=fixed_name(child),
        )
        self.node_group_name = self.node_group.node_group_name
        outputs: dict[str, object] = {
            "node_group_name": self.node_group_name,
            "launch_template_id": self.launch_template_id,
        }
        if self.efa_security_group_id is not None:
            outputs["efa_security_group_id"] = self.efa_security_group_id
        if self.placement_group_name is not None:
            outputs["placement_group_name"] = self.placement_group_name
        self.register_outputs(outputs)
