"""ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding objects as data. Pure.

Kubernetes' built-in admission (admissionregistration.k8s.io/v1, GA since 1.30; every cluster version the
config accepts is newer): CEL expressions the API server evaluates, no webhook or controller to run.
https://kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy/

The bindings select the namespaces labelled ``aiplat.io/workloads: "true"`` (the trainer's, the inference
server's, every team's, the publisher's): what runs there was built by this platform, so

* ``aiplat-workload-images``: every container, init container, ephemeral container and image volume comes
  from the stack's ECR namespace (``<account>.dkr.ecr.<region>.amazonaws.com/<env prefix>/...``) by digest,
  or from an upstream registry the config names (pinned by digest too); an image of a team's repositories
  (``<env prefix>/teams/<team>/...``) only in that team's namespace;
* ``aiplat-publisher-identity``: the publisher's service account runs pods only in the publisher's
  namespace (it is the one identity that may write releases);
* ``aiplat-publisher-nodes``: the publisher's pods run on its own nodes, and no other workload pod tolerates
  their taint (``publisher_nodes.py``);
* ``aiplat-team-pods`` (team namespaces, ``aiplat.io/team``): no privileged container, host path, host
  network, PID or IPC namespace (Pod Security ``restricted`` refuses them as well; this holds even if the
  namespace's Pod Security labels are changed);
* ``aiplat-trainjobs``: a TrainJob's image (the same two rules) and ``runtimePatches`` (Kubeflow Trainer
  v2.3.0: pod ``serviceAccountName``, container ``securityContext``, ``volumes``) stay within the same
  rules, so a job is refused when it is submitted rather than its pods one by one;
* ``aiplat-team-priorities`` (team namespaces): a TrainJob, JobSet, Job or Pod names only a
  WorkloadPriorityClass the team may use (``teams.<team>.priority_classes``, as namespace labels), and
  its pods no other ``priorityClassName`` and no integer ``priority``;
* ``aiplat-workload-priority`` (team namespaces): a team's members do not change a Workload's priority.

``aiplat-system-images`` is bound to every other namespace (the charts' and the node agents':
cert-manager, monitoring, node-exporters, keda, kueue-system, ...) except ``kube-system`` (and the two
namespaces that run no pods, ``kube-public`` and ``kube-node-lease``): every image is one the stack
records, from the stack's own ECR registry (the image cache's repositories and the copy area) with the
digest ``infra/mirror/digests.py`` records for it (``AdmissionRules.system_images``), so neither another
image of a cached public registry nor another digest of a recorded one runs there.
``aiplat-kube-system-images`` holds ``kube-system`` to the same list plus the EKS add-ons (vpc-cni,
kube-proxy, CoreDNS, the EBS CSI driver, the Pod Identity and node monitoring agents), which run there from
EKS's own registry of the region (a different account in opt-in regions,
https://docs.aws.amazon.com/eks/latest/userguide/add-ons-images.html) by tag: EKS, not this program, sets
and updates those images, so their repositories are allowed, not their digests.

``aiplat-addon-namespaces`` (every namespace and the cluster-scoped objects, for the add-ons' service
accounts only, ``matchConditions`` on ``request.userInfo.username``): the kube-prometheus-stack operator,
cert-manager, KEDA, Karpenter and the load balancer controller write pods, workloads, Secrets, ConfigMaps,
Services, service accounts and RBAC only in their own namespaces (and cert-manager
where its Certificates are); anywhere else only a metadata update the add-on needs (the load balancer
controller's finalizers). Their ClusterRoles still let them do more; this is what holds a compromised
add-on off the inference namespace's keys' Services, the publisher's ``release-signing-key`` ConfigMap and
kube-system's pods. Reads cannot be held by admission.

Every expression guards optional fields with ``has()`` before reading them, and stays within standard CEL
(``all``, ``matches``, ``has``, ``in``): the tests evaluate them with cel-python on allowed and refused
objects.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from infra.admission.addons import (
    AddonIdentity,
    addon_match_conditions,
    addon_resource_rules,
    addon_validations,
)
from infra.admission.cel import TRAINJOBS, validation
from infra.admission.cel import quote as _quote
from infra.admission.priorities import (
    QUEUED_KINDS,
    WORKLOADS,
    team_priority_validations,
    workload_priority_validations,
)
from infra.admission.publisher_nodes import publisher_nodes_validations
from infra.core.labels import TEAM_LABEL, WORKLOADS_LABEL
from infra.core.namespaces import NAMESPACE_NAME_LABEL, PART_OF
from infra.core.teams import team_repository_prefix

API_VERSION = "admissionregistration.k8s.io/v1"
DIGEST = r"@sha256:[a-f0-9]{64}$"
SPEC = "__SPEC__"  # placeholder for a patched pod spec in the TrainJob expressions
PODS = {
    "apiGroups": [""],
    "apiVersions": ["v1"],
    "operations": ["CREATE", "UPDATE"],
    "resources": ["pods", "pods/ephemeralcontainers"],
}


@dataclass(frozen=True, kw_only=True)
class AdmissionRules:
    """What the policies allow: the stack's ECR namespace, upstream registries (``registry/path`` prefixes),
    the publisher's service account and namespace, and the service account a TrainJob's pods may use."""

    account_id: str
    region: str
    ecr_namespace: str
    publisher_namespace: str
    publisher_service_account: str
    trainer_service_account: str
    upstream_registries: Sequence[str] = ()
    partition_dns_suffix: str = "amazonaws.com"
    # namespace -> team: a team's repositories run only in its namespace
    team_namespaces: Mapping[str, str] = field(default_factory=dict)
    # the images the system namespaces may run: ``<registry>/<repository>@sha256:...`` (the charts' recorded
    # digests in the stack's ECR, infra/mirror/digests.py)
    system_images: Sequence[str] = ()
    # the add-ons' service accounts the policy aiplat-addon-namespaces confines
    addons: Sequence[AddonIdentity] = ()
    # EKS's add-on registry in the stack's region (``eks_addon_registry``): kube-system runs its add-ons'
    # images by tag beside the recorded ones; None: no registry known for the region, kube-system unbound
    eks_registry: str | None = None

    @property
    def registry(self) -> str:
        return f"{self.account_id}.dkr.ecr.{self.region}.{self.partition_dns_suffix}"

    def system_image_pattern(self) -> str:
        """One of ``system_images``, with a tag before the digest or not (``repo:v1@sha256:...``, as charts
        render an image with a digest): the digest is what the kubelet pulls. No image: nothing matches."""
        refs = []
        for image in sorted(self.system_images):
            repository, at, digest = image.partition("@")
            if not at or not re.fullmatch(DIGEST.lstrip("@").rstrip("$"), digest):
                raise ValueError(f"system image {image!r} is not <repository>@sha256:<64 hex>")
            refs.append(
                re.escape(repository) + r"(:[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?" + re.escape(at + digest)
            )
        return "^(" + "|".join(refs) + ")$" if refs else "^$"

    def kube_system_image_pattern(self) -> str:
        """What kube-system may run: a recorded image (``system_image_pattern``), or an EKS add-on's image
        from EKS's registry of the region (vpc-cni, kube-proxy, CoreDNS, the EBS CSI driver and its sidecars,
        the Pod Identity and node monitoring agents), by tag: EKS sets and updates those."""
        if self.eks_registry is None:
            raise ValueError(f"no EKS add-on registry known for region {self.region}")
        eks = (
            "^"
            + re.escape(f"{self.eks_registry}/")
            + "("
            + "|".join(EKS_ADDON_REPOSITORIES)
            + ")"
            + r"(:[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?(@sha256:[a-f0-9]{64})?$"
        )
        return f"({self.system_image_pattern()})|({eks})"

    def image_pattern(self) -> str:
        """The RE2 pattern an image reference must match (CEL ``matches`` is RE2, as Python's ``re`` here)."""
        ecr = re.escape(f"{self.registry}/{self.ecr_namespace}/")
        prefixes = [ecr + r"[a-z0-9][a-z0-9._/-]*"]
        prefixes += [
            re.escape(r.rstrip("/") + "/") + r"[a-z0-9][a-z0-9._/-]*" for r in self.upstream_registries
        ]
        return "^(" + "|".join(prefixes) + ")" + DIGEST

    def teams_pattern(self) -> str:
        """What every team's repository starts with (``<registry>/<ECR namespace>/teams/``)."""
        return "^" + re.escape(f"{self.registry}/{team_repository_prefix(self.ecr_namespace, '')}")

    def team_pattern(self, team: str) -> str:
        """An image of one of ``team``'s repositories (that it is by digest is ``image_pattern``'s)."""
        return "^" + re.escape(f"{self.registry}/{team_repository_prefix(self.ecr_namespace, team)}/")

    def team_image_ok(self, image: str) -> str:
        """CEL: ``image`` is no team's, or the team's whose namespace the request is in."""
        clauses = [f"!{image}.matches({_quote(self.teams_pattern())})"]
        for namespace, team in sorted(self.team_namespaces.items()):
            own = _quote(self.team_pattern(team))
            clauses.append(f"(request.namespace == {_quote(namespace)} && {image}.matches({own}))")
        return "(" + " || ".join(clauses) + ")"


# The repositories of the EKS add-ons the stacks install (vpc-cni: amazon-k8s-cni, its init image and the
# network policy agent; everything else under eks/), and EKS's registry account in each region (it differs
# in opt-in regions): https://docs.aws.amazon.com/eks/latest/userguide/add-ons-images.html (the regions of
# the table read there; us-west-2 also in aws/eks-charts stable/aws-efa-k8s-device-plugin/values.yaml).
EKS_ADDON_REPOSITORIES = (
    r"eks/[a-z0-9][a-z0-9._-]*",
    "amazon-k8s-cni",
    "amazon-k8s-cni-init",
    "amazon/aws-network-policy-agent",
)
EKS_ADDON_ACCOUNTS = {
    "us-east-1": "602401143452",
    "us-west-2": "602401143452",
    "eu-west-1": "602401143452",
    "ap-northeast-1": "602401143452",
    "ap-northeast-2": "602401143452",
    "ap-northeast-3": "602401143452",
    "ap-south-1": "602401143452",
    "ap-southeast-1": "602401143452",
    "ap-southeast-2": "602401143452",
    "ap-east-1": "800184023465",
    "af-south-1": "877085696533",
    "ap-southeast-3": "296578399912",
    "ap-south-2": "900889452093",
    "ap-southeast-4": "491585149902",
    "ap-southeast-5": "151610086707",
    "ap-southeast-7": "121268973566",
}


def eks_addon_registry(region: str, dns_suffix: str = "amazonaws.com") -> str | None:
    """EKS's add-on registry in ``region`` (None where the table above has no entry)."""
    account = EKS_ADDON_ACCOUNTS.get(region)
    return None if account is None else f"{account}.dkr.ecr.{region}.{dns_suffix}"


def _all_optional(list_expr: str, var: str, cond: str) -> str:
    """``cond`` holds for every element of the optional list field ``list_expr`` (absent: true)."""
    owner, _, field = list_expr.rpartition(".")
    return f"(!has({owner}.{field}) || {list_expr}.all({var}, {cond}))"


def _not_privileged(c: str) -> str:
    sc = f"{c}.securityContext"
    return f"(!has({sc}) || !has({sc}.privileged) || !{sc}.privileged)"


def _pod_spec_images(spec: str, image_ok: Callable[[str], str]) -> str:
    """``image_ok`` (CEL over an image expression) holds for every image of the pod spec ``spec``."""
    return " && ".join(
        [
            f"{spec}.containers.all(c, {image_ok('c.image')})",
            _all_optional(f"{spec}.initContainers", "c", image_ok("c.image")),
            _all_optional(f"{spec}.ephemeralContainers", "c", image_ok("c.image")),
            _all_optional(
                f"{spec}.volumes",
                "v",
                f"(!has(v.image) || !has(v.image.reference) || {image_ok('v.image.reference')})",
            ),
        ]
    )


def _host_access_free(spec: str, containers: Sequence[str], *, host_namespaces: bool = True) -> str:
    """No privileged container, host path (and with ``host_namespaces`` no host network/PID/IPC) in the pod
    spec. A TrainJob's pod spec patch has no host namespace fields (Kubeflow Trainer v2.3.0 PodSpecPatch),
    and the API server type-checks an expression against the CRD's schema: naming an absent field would
    fail the policy's compilation, and with ``failurePolicy: Fail`` refuse every TrainJob."""
    parts = [_all_optional(f"{spec}.{field}", "c", _not_privileged("c")) for field in containers]
    parts.append(_all_optional(f"{spec}.volumes", "v", "!has(v.hostPath)"))
    if host_namespaces:
        parts += [f"(!has({spec}.{h}) || !{spec}.{h})" for h in ("hostNetwork", "hostPID", "hostIPC")]
    return " && ".join(parts)


TEAM_IMAGE_MESSAGE = (
    "an image of a team's repositories ({teams}<team>/) runs only in that team's namespace; push it to "
    "the repositories of the team whose namespace runs it"
)


def workload_images_validations(rules: AdmissionRules) -> list[dict[str, Any]]:
    pattern = _quote(rules.image_pattern())
    where = f"{rules.registry}/{rules.ecr_namespace}/"
    return [
        validation(
            _pod_spec_images("object.spec", lambda image: f"{image}.matches({pattern})"),
            f"every image of a pod in a workload namespace comes from the stack's ECR repositories ({where}) "
            "by digest (@sha256:...); push the image there and reference it by digest",
        ),
        validation(
            _pod_spec_images("object.spec", rules.team_image_ok),
            TEAM_IMAGE_MESSAGE.format(teams=f"{where}teams/"),
        ),
    ]


def system_images_validations(rules: AdmissionRules) -> list[dict[str, Any]]:
    pattern = _quote(rules.system_image_pattern())
    return [
        validation(
            _pod_spec_images("object.spec", lambda image: f"{image}.matches({pattern})"),
            f"every image of a pod in a system namespace is one the stack records: from the stack's ECR "
            f"registry ({rules.registry}/) with its recorded digest (infra/mirror/digests.py; a chart's "
            "images come through the image cache); record a new image with `aiplat images resolve`",
        )
    ]


def kube_system_images_validations(rules: AdmissionRules) -> list[dict[str, Any]]:
    pattern = _quote(rules.kube_system_image_pattern())
    return [
        validation(
            _pod_spec_images("object.spec", lambda image: f"{image}.matches({pattern})"),
            f"every image of a pod in kube-system is one the stack records (its ECR registry, "
            f"{rules.registry}/, with the recorded digest) or an EKS add-on's from EKS's registry "
            f"({rules.eks_registry}/); record a chart's new image with `aiplat images resolve`",
        )
    ]


# Namespaces the system images policy is not bound to: kube-system runs EKS's add-ons from EKS's own
# registries by tag (see the module's docstring); kube-public and kube-node-lease run no pods.
SYSTEM_UNBOUND = ("kube-system", "kube-public", "kube-node-lease")


def publisher_identity_validations(rules: AdmissionRules) -> list[dict[str, Any]]:
    sa, ns = rules.publisher_service_account, rules.publisher_namespace
    return [
        validation(
            f"!has(object.spec.serviceAccountName) || object.spec.serviceAccountName != '{sa}' "
            f"|| request.namespace == '{ns}'",
            f"the service account '{sa}' (the release publisher's) runs pods only in namespace '{ns}'",
        )
    ]


def team_pod_validations() -> list[dict[str, Any]]:
    return [
        validation(
            "object.spec.containers.all(c, "
            + _not_privileged("c")
            + ") && "
            + _host_access_free("object.spec", ["initContainers", "ephemeralContainers"]),
            "pods in team namespaces run no privileged container, host path, host network, host PID or "
            "host IPC; remove them from the pod spec",
        )
    ]


def _patched_pod_specs_all(cond_on_spec: str) -> str:
    """``cond_on_spec`` (written over ``SPEC``) holds for the pod spec of every replicated job of every
    runtime patch of the TrainJob (Kubeflow Trainer v2.3.0 TrainJob.spec.runtimePatches)."""
    s = "j.template.spec.template.spec"
    jobs = "p.trainingRuntimeSpec.template.spec.replicatedJobs"
    job_ok = (
        "!has(j.template) || !has(j.template.spec) || !has(j.template.spec.template) "
        f"|| !has(j.template.spec.template.spec) || ({cond_on_spec.replace(SPEC, s)})"
    )
    patch_ok = (
        "!has(p.trainingRuntimeSpec) || !has(p.trainingRuntimeSpec.template) "
        "|| !has(p.trainingRuntimeSpec.template.spec) "
        f"|| !has({jobs}) || {jobs}.all(j, {job_ok})"
    )
    return f"!has(object.spec.runtimePatches) || object.spec.runtimePatches.all(p, {patch_ok})"


def trainjob_validations(rules: AdmissionRules) -> list[dict[str, Any]]:
    pattern = _quote(rules.image_pattern())
    sa = rules.trainer_service_account
    image_volumes = _all_optional(
        f"{SPEC}.volumes",
        "v",
        f"(!has(v.image) || !has(v.image.reference) || (v.image.reference.matches({pattern}) "
        f"&& {rules.team_image_ok('v.image.reference')}))",
    )
    teams = f"{rules.registry}/{rules.ecr_namespace}/teams/"
    return [
        validation(
            "!has(object.spec.trainer) || !has(object.spec.trainer.image) "
            f"|| object.spec.trainer.image.matches({pattern})",
            "spec.trainer.image comes from the stack's ECR repositories by digest",
        ),
        validation(
            "!has(object.spec.trainer) || !has(object.spec.trainer.image) "
            f"|| {rules.team_image_ok('object.spec.trainer.image')}",
            "spec.trainer.image: " + TEAM_IMAGE_MESSAGE.format(teams=teams),
        ),
        validation(
            _patched_pod_specs_all(f"!has({SPEC}.serviceAccountName) || {SPEC}.serviceAccountName == '{sa}'"),
            f"runtimePatches may not change the pods' service account (only '{sa}', the trainer's)",
        ),
        validation(
            _patched_pod_specs_all(
                f"{_host_access_free(SPEC, ['containers', 'initContainers'], host_namespaces=False)} "
                f"&& {image_volumes}"
            ),
            "runtimePatches may not add privileged containers, host paths or images from outside the "
            "stack's ECR repositories",
        ),
    ]


def policy(
    name: str, resource_rules: list[dict[str, Any]], validations: list[dict[str, Any]]
) -> dict[str, Any]:
    """A ValidatingAdmissionPolicy: ``failurePolicy: Fail`` (an expression that errors refuses)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": dict(PART_OF)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": resource_rules},
            "validations": validations,
        },
    }


def _denying_binding(policy_name: str, namespaces: dict[str, Any]) -> dict[str, Any]:
    """The binding of ``policy_name`` to the namespaces ``namespaces`` selects, denying."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": policy_name, "labels": dict(PART_OF)},
        "spec": {
            "policyName": policy_name,
            "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": namespaces},
        },
    }


def binding(policy_name: str, *, teams_only: bool = False) -> dict[str, Any]:
    """The binding of ``policy_name`` to the workload namespaces (``teams_only``: those of teams), denying."""
    key, value = WORKLOADS_LABEL
    selector: dict[str, Any] = {"matchLabels": {key: value}}
    if teams_only:
        selector["matchExpressions"] = [{"key": TEAM_LABEL, "operator": "Exists"}]
    return _denying_binding(policy_name, selector)


def system_binding(policy_name: str) -> dict[str, Any]:
    """The binding of ``policy_name`` to every namespace that is no workload namespace, but those of
    ``SYSTEM_UNBOUND``, denying."""
    key, value = WORKLOADS_LABEL
    return _denying_binding(
        policy_name,
        {
            "matchExpressions": [
                {"key": key, "operator": "NotIn", "values": [value]},
                {"key": NAMESPACE_NAME_LABEL, "operator": "NotIn", "values": list(SYSTEM_UNBOUND)},
            ]
        },
    )


def admission_objects(rules: AdmissionRules) -> list[dict[str, Any]]:
    """Every policy and its binding."""
    policies = [
        (policy("aiplat-workload-images", [PODS], workload_images_validations(rules)), False),
        (policy("aiplat-publisher-identity", [PODS], publisher_identity_validations(rules)), False),
        (
            policy("aiplat-publisher-nodes", [PODS], publisher_nodes_validations(rules.publisher_namespace)),
            False,
        ),
        (policy("aiplat-team-pods", [PODS], team_pod_validations()), True),
        (policy("aiplat-trainjobs", [TRAINJOBS], trainjob_validations(rules)), False),
        (policy("aiplat-team-priorities", QUEUED_KINDS, team_priority_validations()), True),
        (policy("aiplat-workload-priority", [WORKLOADS], workload_priority_validations()), True),
    ]
    out = []
    for p, teams_only in policies:
        out += [p, binding(p["metadata"]["name"], teams_only=teams_only)]
    system = policy("aiplat-system-images", [PODS], system_images_validations(rules))
    out += [system, system_binding(system["metadata"]["name"])]
    if rules.addons:
        addons = policy("aiplat-addon-namespaces", addon_resource_rules(), addon_validations(rules.addons))
        addons["spec"]["matchConditions"] = addon_match_conditions(rules.addons)
        # an empty namespaceSelector matches every namespace; cluster-scoped objects are matched whatever
        # it says (ValidatingAdmissionPolicyBinding matchResources.namespaceSelector)
        out += [addons, _denying_binding(addons["metadata"]["name"], {})]
    if rules.eks_registry is not None:
        kube = policy("aiplat-kube-system-images", [PODS], kube_system_images_validations(rules))
        selector = {"matchLabels": {NAMESPACE_NAME_LABEL: "kube-system"}}
        out += [kube, _denying_binding(kube["metadata"]["name"], selector)]
    return out
