"""Load balancers: TLS 1.3-only security policies, and HTTP listeners that only redirect to HTTPS.

Covers listeners Pulumi creates (``aws.lb.Listener``, ``aws.alb.Listener``) and the load balancers the AWS
Load Balancer Controller creates from Kubernetes Ingresses and Services (their annotations, or the
controller's default policy from its Helm values).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from infra.inference.documents import alb
from infra.inference.documents.inference import VLLM_GUARDED_PREFIXES
from infra.inference.router import documents as router_docs
from infra.inference.rules import TLS13_ONLY_POLICIES
from infra.services.config import LoadBalancerControllerConfig

from .core import (
    HIGH,
    UNKNOWN,
    Ctx,
    Res,
    Stack,
    Violation,
    as_list,
    deferred_unknowns,
    dig,
    json_doc,
    resource_rule,
    stack_rule,
    violation,
)
from .kubernetes import RELEASE, SERVICE, containers, pod_specs

# What ELB (API, CloudFormation, the LB controller) uses when no policy is named.
ELB_DEFAULT_POLICY = "ELBSecurityPolicy-2016-08"
LISTENERS = ("aws:lb/listener:Listener", "aws:alb/listener:Listener")
POLICY_CONFIG = {
    "allowedPolicies": {
        "type": "array",
        "items": {"type": "string"},
        # the TLS 1.3-only policies the plan's inference-tls13-only rule accepts (one list for both)
        "default": list(TLS13_ONLY_POLICIES),
        "description": "ELB security policies accepted on TLS/HTTPS listeners.",
    }
}
DOC = "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/describe-ssl-policies.html"


@resource_rule(
    "lb-tls13-policy",
    description="HTTPS and TLS listeners use a TLS 1.3-only security policy.",
    severity=HIGH,
    doc=DOC,
    types=LISTENERS,
    unknowns="An unknown protocol or policy is a violation (they are literals).",
    config=POLICY_CONFIG,
)
def lb_tls13_policy(r: Res, ctx: Ctx) -> Iterator[Violation]:
    protocol = r.get("protocol")
    if protocol in ("HTTP", "TCP", "UDP", "TCP_UDP", "GENEVE"):
        return
    policy = r.get("sslPolicy")
    if protocol is None and policy is None and r.get("certificateArn") is None:
        return  # an HTTP listener by default
    allowed = list(ctx.config["allowedPolicies"])
    if policy not in allowed:
        shown = policy if policy is not None else f"unset (defaults to {ELB_DEFAULT_POLICY})"
        yield violation(
            f"{protocol} listener uses security policy {shown}", f"set ssl_policy to one of {allowed}"
        )


def _redirects_to_https(action: Any) -> bool:
    return dig(action, "type") == "redirect" and dig(action, "redirect", "protocol") == "HTTPS"


@resource_rule(
    "lb-http-redirect-only",
    description="HTTP listeners only redirect to HTTPS; they never forward plain-text traffic.",
    severity=HIGH,
    doc="https://docs.aws.amazon.com/elasticloadbalancing/latest/application/listener-update-rules.html",
    types=LISTENERS,
    unknowns="An unknown protocol or action is a violation.",
)
def lb_http_redirect_only(r: Res, ctx: Ctx) -> Iterator[Violation]:
    protocol = r.get("protocol")
    if not (
        protocol == "HTTP" or protocol is UNKNOWN or (protocol is None and r.get("certificateArn") is None)
    ):
        return
    actions = r.get("defaultActions")
    actions = [UNKNOWN] if actions is UNKNOWN else as_list(actions)
    if not actions or not all(_redirects_to_https(a) for a in actions):
        yield violation(
            f"HTTP listener actions {[dig(a, 'type') for a in actions]} serve plain text",
            "make the default action a redirect to protocol HTTPS, port 443, status HTTP_301",
        )


INGRESS = "kubernetes:networking.k8s.io/v1:Ingress"
INGRESS_CLASS_PARAMS = "kubernetes:elbv2.k8s.aws/v1beta1:IngressClassParams"
# the chart the program installs the controller from (its config default)
LBC_CHART = LoadBalancerControllerConfig.model_fields["chart"].default
ALB = alb.PREFIX
NLB = "service.beta.kubernetes.io/aws-load-balancer-"


def controller_default_policy(stack: Stack) -> Any:
    """The ssl policy the stack's AWS Load Balancer Controller applies when an Ingress names none:
    IngressClassParams spec.sslPolicy, else the chart's defaultSSLPolicy value, else ELB's default."""
    for params in stack.of_type(INGRESS_CLASS_PARAMS):
        if params.get("spec", "sslPolicy") is not None:
            return params.get("spec", "sslPolicy")
    for release in stack.of_type(RELEASE):
        if release.get("chart") == LBC_CHART and dig(release.props, "values", "defaultSSLPolicy"):
            return dig(release.props, "values", "defaultSSLPolicy")
    return None


def _listen_ports(annotations: dict[str, Any]) -> list[str]:
    ports = json_doc(annotations.get(f"{ALB}listen-ports"))
    protocols = []
    for entry in as_list(ports) if isinstance(ports, list) else []:
        if isinstance(entry, dict):
            protocols += list(entry)
    return protocols


def unknown_annotations(r: Res) -> list[str]:
    """``["metadata.annotations"]`` for an Ingress, or a Service that may be a LoadBalancer, whose
    annotations are unknown as a whole (built with one apply over a value of this update): deferred at
    preview, since they decide the load balancer's TLS policy."""
    if r.get("metadata", "annotations") is not UNKNOWN:
        return []
    if r.type == INGRESS or (r.type == SERVICE and r.get("spec", "type") in ("LoadBalancer", UNKNOWN)):
        return ["metadata.annotations"]
    return []


def _annotations(r: Res, ctx: Ctx) -> tuple[dict[str, Any] | None, list[Violation]]:
    """The annotations of ``r``; None (and, outside a preview, a violation) when they are unknown."""
    ann = r.get("metadata", "annotations")
    if ann is UNKNOWN:
        if ctx.at_preview:
            return None, []  # checked-at-update lists it; the update checks the resolved annotations
        return None, [
            violation(
                f"the annotations of {r.label} are unknown outside a preview and cannot be reviewed",
                "build the annotations with known values",
                r.urn,
            )
        ]
    return (ann if isinstance(ann, dict) else {}), []


@stack_rule(
    "k8s-load-balancer-tls13",
    description="Ingresses and LoadBalancer Services served by the AWS Load Balancer Controller use a TLS "
    "1.3-only policy (annotation, IngressClassParams or the controller's defaultSSLPolicy; the controller's "
    "own default is ELBSecurityPolicy-2016-08), and Ingresses with an HTTP listener redirect it to HTTPS.",
    severity=HIGH,
    doc="https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/guide/ingress/annotations/#ssl-policy",
    unknowns=deferred_unknowns("annotations map", kind="stack")
    + " An unknown annotation value counts as set (a certificate ARN of this update); an unknown policy "
    "annotation is a violation.",
    config=POLICY_CONFIG,
    defers=unknown_annotations,
)
def k8s_load_balancer_tls13(stack: Stack, ctx: Ctx) -> Iterator[Violation]:
    allowed = list(ctx.config["allowedPolicies"])
    default = controller_default_policy(stack) or ELB_DEFAULT_POLICY
    for ing in stack.of_type(INGRESS):
        ann, refused = _annotations(ing, ctx)
        yield from refused
        if ann is None:
            continue
        cls = ing.get("spec", "ingressClassName") or ann.get("kubernetes.io/ingress.class")
        if cls not in (alb.INGRESS_CLASS, UNKNOWN) and not any(k.startswith(ALB) for k in ann):
            continue
        policy = ann.get(f"{ALB}ssl-policy", default)
        tls = ann.get(f"{ALB}certificate-arn") is not None or ing.get("spec", "tls") is not None
        if tls and policy not in allowed:
            yield violation(
                f"Ingress {ing.name!r} gets security policy {policy}",
                f"annotate {ALB}ssl-policy with one of {allowed} (or set the controller's defaultSSLPolicy)",
                ing.urn,
            )
        ports = _listen_ports(ann)
        if "HTTP" in ports:
            # a redirect comes too late: the request (its Authorization header, an API key) has already
            # crossed the network in clear text
            yield violation(
                f"Ingress {ing.name!r} listens on HTTP: a request sent there travels unencrypted, its API "
                "key with it, before any redirect",
                f"listen on HTTPS only: {ALB}listen-ports '[{{\"HTTPS\": 443}}]'",
                ing.urn,
            )
    for svc in stack.of_type(SERVICE):
        if not unknown_annotations(svc) and svc.get("spec", "type") != "LoadBalancer":
            continue
        ann, refused = _annotations(svc, ctx)
        yield from refused
        if ann is None or svc.get("spec", "type") != "LoadBalancer" or ann.get(f"{NLB}ssl-cert") is None:
            continue
        policy = ann.get(f"{NLB}ssl-negotiation-policy", ELB_DEFAULT_POLICY)
        if policy not in allowed:
            yield violation(
                f"Service {svc.name!r} (NLB TLS) gets security policy {policy}",
                f"annotate {NLB}ssl-negotiation-policy with one of {allowed}",
                svc.urn,
            )


DEPLOYMENT_TYPES = ("kubernetes:apps/v1:Deployment", "kubernetes:apps/v1:StatefulSet")
# ALB authentication actions (authenticate-oidc / authenticate-cognito on every rule of the Ingress).
ALB_AUTH_TYPES = ("oidc", "cognito")
API_KEY_FLAG = "--api-key"
CONFIG_FLAG = "--config"


def _key_refs_from_secrets(container: dict[str, Any], pod: dict[str, Any]) -> bool:
    """Whether the container reads its API keys from a file of a Secret volume: vLLM's ``--config <file>``
    under the mount of a ``secret`` volume of the pod, and no ``--api-key`` on its command line (values
    there, even ``$(VAR)`` expanded by the kubelet, are in ``/proc/<pid>/cmdline`` for every process of
    the node to read)."""
    args = [*as_list(container.get("command")), *as_list(container.get("args"))]
    if API_KEY_FLAG in args or CONFIG_FLAG not in args:
        return False
    i = args.index(CONFIG_FLAG) + 1
    path = args[i] if i < len(args) else None
    if not isinstance(path, str):
        return False
    secrets = {
        v.get("name")
        for v in as_list(pod.get("volumes"))
        if isinstance(v, dict) and v.get("secret") is not None
    }
    return any(
        isinstance(m, dict)
        and m.get("name") in secrets
        and isinstance(m.get("mountPath"), str)
        and path.startswith(m["mountPath"].rstrip("/") + "/")
        for m in as_list(container.get("volumeMounts"))
    )


def _backend_pods(stack: Stack, namespace: Any, service: Any) -> tuple[list[dict[str, Any]], bool]:
    """The pod specs of the Deployments/StatefulSets in ``namespace`` whose pod labels the Service
    ``service`` selects, and whether any of them is unknown (built from values of this update)."""
    selectors = [
        s.get("spec", "selector")
        for s in stack.of_type(SERVICE)
        if s.get("metadata", "name") == service and s.get("metadata", "namespace") == namespace
    ]
    out: list[dict[str, Any]] = []
    unknown = False
    for w in stack.of_type(*DEPLOYMENT_TYPES):
        if w.get("metadata", "namespace") != namespace:
            continue
        labels = w.get("spec", "template", "metadata", "labels")
        for sel in selectors:
            if isinstance(sel, dict) and isinstance(labels, dict) and sel.items() <= labels.items():
                spec = w.get("spec", "template", "spec")
                if spec is UNKNOWN or dig(spec, "containers") is UNKNOWN:
                    unknown = True
                else:
                    out += [s for _, s in pod_specs(spec or {})]
    return out, unknown


CONFIG_MAP = "kubernetes:core/v1:ConfigMap"


def _router_backends(stack: Stack, namespace: Any, pod: dict[str, Any]) -> tuple[list[tuple[str, str]], bool]:
    """When ``pod`` runs the model-name router's launcher (it checks no key, it forwards them:
    infra/inference/router), the (namespace, Service) of every backend of the ConfigMap file it reads
    (``--backends``), and whether that file is unknown or unreadable; else ([], False)."""
    for c in containers(pod):
        args = [*as_list(c.get("command")), *as_list(c.get("args"))]
        if router_docs.LAUNCHER_MODULE not in args or "--backends" not in args:
            continue
        i = args.index("--backends") + 1
        path = args[i] if i < len(args) else None
        if not isinstance(path, str) or "/" not in path:
            return [], True
        folder, file = path.rsplit("/", 1)
        mounts = as_list(c.get("volumeMounts"))
        volume = next(
            (m.get("name") for m in mounts if isinstance(m, dict) and m.get("mountPath") == folder), None
        )
        volumes = [v for v in as_list(pod.get("volumes")) if isinstance(v, dict) and v.get("name") == volume]
        maps = {dig(v, "configMap", "name") for v in volumes}
        data = [
            m.get("data", file)
            for m in stack.of_type(CONFIG_MAP)
            if m.get("metadata", "namespace") == namespace and m.get("metadata", "name") in maps
        ]
        if len(data) != 1 or not isinstance(data[0], str):
            return [], True
        try:
            return router_docs.backend_services(data[0]), False
        except (ValueError, AttributeError):
            return [], True
    return [], False


def _routes(ing: Res) -> list[tuple[Any, Any]]:
    """(path, backend service name) of every rule path of an Ingress, and ("<default>", service) for a
    defaultBackend."""
    out = []
    default = ing.get("spec", "defaultBackend", "service", "name")
    if default is not None:
        out.append(("<default backend>", default))
    for rule in as_list(ing.get("spec", "rules")):
        for path in as_list(dig(rule, "http", "paths")):
            out.append((dig(path, "path"), dig(path, "backend", "service", "name")))
    return out


@stack_rule(
    "k8s-internet-ingress-authenticated",
    description="An internet-facing ALB Ingress authenticates every request: ALB authentication "
    "(auth-type oidc or cognito), or a backend that checks API keys from a Secret on every routed path "
    "(vLLM --config <file of a mounted Secret> with the keys, none on the command line, paths under its "
    "guarded prefixes "
    f"{', '.join(VLLM_GUARDED_PREFIXES)}). A path outside them (/metrics, /health, /) is served to anyone.",
    severity=HIGH,
    doc="https://docs.vllm.ai/en/latest/usage/security.html",
    unknowns=deferred_unknowns("annotations map", kind="stack")
    + " An unknown path, backend or container argument is a violation outside a preview, skipped at one.",
    defers=unknown_annotations,
)
def k8s_internet_ingress_authenticated(stack: Stack, ctx: Ctx) -> Iterator[Violation]:
    for ing in stack.of_type(INGRESS):
        ann, refused = _annotations(ing, ctx)
        yield from refused
        if ann is None or ann.get(f"{ALB}scheme") != "internet-facing":
            continue
        if ann.get(f"{ALB}auth-type") in ALB_AUTH_TYPES:
            continue
        namespace = ing.get("metadata", "namespace")
        routes = _routes(ing)
        if not routes:
            continue
        for path, service in routes:
            if UNKNOWN in (path, service):
                if not ctx.at_preview:
                    yield violation(
                        f"Ingress {ing.name!r} routes an unknown path or backend",
                        "build the Ingress paths from known values",
                        ing.urn,
                    )
                continue
            if not (isinstance(path, str) and path.startswith(tuple(f"{p}/" for p in VLLM_GUARDED_PREFIXES))):
                yield violation(
                    f"internet-facing Ingress {ing.name!r} routes {path!r} to {service!r} without "
                    "authentication (no ALB auth-type; the backend checks keys only under "
                    f"{', '.join(VLLM_GUARDED_PREFIXES)})",
                    "route only the API paths (e.g. /v1/completions, /v1/models), or annotate "
                    f"{ALB}auth-type: oidc with an identity provider",
                    ing.urn,
                )
                continue
            pods, unknown = _backend_pods(stack, namespace, service)
            # the router checks no key: the pods of the Services it forwards to must
            routed: list[dict[str, Any]] = []
            for p in pods:
                backends, hidden = _router_backends(stack, namespace, p)
                unknown |= hidden
                for ns, svc in backends:
                    more, hidden = _backend_pods(stack, ns, svc)
                    unknown |= hidden or not more
                    routed += more
                routed += [] if backends or hidden else [p]
            pods = routed
            if unknown and ctx.at_preview:
                continue
            checked = all(any(_key_refs_from_secrets(c, p) for c in containers(p)) for p in pods)
            if not pods or unknown or not checked:
                yield violation(
                    f"internet-facing Ingress {ing.name!r} routes {path!r} to {service!r}, whose pods do not "
                    f"check API keys read from a Secret's file ({CONFIG_FLAG} under a secret volume's mount, "
                    f"no {API_KEY_FLAG} on the command line) and the ALB does not authenticate",
                    f"run the server with {CONFIG_FLAG} <file of a mounted Secret> holding the keys, or "
                    f"annotate {ALB}auth-type: oidc",
                    ing.urn,
                )
