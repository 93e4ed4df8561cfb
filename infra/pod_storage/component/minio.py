"""Minio: MinIO in the cluster, for deployments that keep their data out of S3 (``storage.backend: minio``).

The community chart (https://charts.min.io/, chart ``minio``, version pinned in the stack config) serves the
S3 API over TLS with a certificate from cert-manager. No credential is ever a literal: the root password and
one password per workload are ``random.RandomPassword`` resources (secret outputs, encrypted in state),
handed to the chart through Kubernetes Secrets (``existingSecret``), never through chart values. Each
workload gets a Secret in its namespace with the standard AWS SDK variables (``AWS_ENDPOINT_URL``,
``AWS_REGION``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``), so trainer and inference code use the
same S3 settings against MinIO as against S3 (where IRSA supplies the credentials instead).

The Kubernetes provider comes in through ``opts.provider`` (the EKS component's ``k8s_provider``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from infra.cluster.component.namespaces import own_namespace
from infra.core import certs, iam
from infra.core.charts import ChartRef
from infra.pod_storage import documents as pod_storage_documents
from infra.pools.documents import nodes
from infra.resources.helm import chart_release
from infra.resources.options import child_options
from infra.storage import documents as storage_documents

RELEASE = "minio"  # release name = chart name, so the service is called "minio"
# Secret in each workload namespace whose ca.crt is the CA of MinIO's certificate (mounted by the workloads)
CA_SECRET = pod_storage_documents.MINIO_CA_SECRET
ROOT_USER = "aiplat-root"  # a user name, not a credential; the password is generated
TLS_SECRET = "minio-tls"


@dataclass(frozen=True, kw_only=True)
class MinioWorkload:
    """A workload that gets its own MinIO user: its namespace, and its policy as an IAM document."""

    namespace: str
    policy: iam.Policy


@dataclass(frozen=True, kw_only=True)
class MinioArgs:
    """Inputs of Minio.

    The chart (``chart``: repository, version, and its images in the stack's ECR) is pinned by the caller;
    ``mode`` is the chart's
    ``standalone`` or ``distributed`` with ``replicas`` pods; ``storage_size`` is per volume (a Kubernetes
    quantity) in ``storage_class`` (None: the cluster default); ``tls_issuer`` is the cert-manager
    ClusterIssuer of the serving certificate; ``buckets`` maps purpose -> bucket name.
    """

    chart: ChartRef
    namespace: str
    mode: str
    replicas: int
    storage_size: str
    storage_class: str | None = None
    tls_issuer: str
    region: str
    # labels of the namespace the release runs in (Pod Security Standards, part-of)
    namespace_labels: Mapping[str, str] = field(default_factory=dict)
    buckets: Mapping[str, str]
    workloads: Mapping[str, MinioWorkload] = field(default_factory=dict)
    # the chart's ``resources`` ({"requests": {...}, "limits": {...}}), required: Helm merges our values
    # into the chart's, so an empty map would keep its default of 16Gi per pod
    resources: Mapping[str, Mapping[str, str]]
    # node pools (aiplat.io/pool) the pods are pinned to: the system pools the plan checked they fit on
    pools: Sequence[str] = ()


def endpoint_url(namespace: str) -> str:
    """The in-cluster HTTPS endpoint of the S3 API."""
    return f"https://{RELEASE}.{namespace}.svc.cluster.local:9000"


def certificate(
    resource_name: str,
    *,
    namespace: str,
    secret: str,
    issuer: str,
    names: dict[str, object],
    opts: pulumi.ResourceOptions,
) -> k8s.apiextensions.CustomResource:
    """A cert-manager Certificate (``certs.leaf_certificate_spec``) from the ClusterIssuer ``issuer``."""
    return k8s.apiextensions.CustomResource(
        resource_name,
        api_version=certs.API_VERSION,
        kind="Certificate",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=secret, namespace=namespace),
        spec=certs.leaf_certificate_spec(secret_name=secret, issuer=issuer, names=names),
        opts=opts,
    )


class Minio(pulumi.ComponentResource):
    """MinIO Helm release with TLS, generated credentials and a bucket per purpose."""

    endpoint: str
    root_secret_name: pulumi.Output[str]
    workload_secret_names: dict[str, pulumi.Output[str]]

    def __init__(self, name: str, args: MinioArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:minio:Minio", name, None, opts)
        # children repeat the component's depends_on (the pools, namespaces, StorageClass, CA issuer)
        child = child_options(self, opts)
        ns = own_namespace(f"{name}-namespace", name=args.namespace, labels=args.namespace_labels, opts=child)
        in_ns = child_options(self, opts, depends_on=[ns])
        self.endpoint = endpoint_url(args.namespace)

        root_password = random.RandomPassword(f"{name}-root-password", length=40, special=False, opts=child)
        root = k8s.core.v1.Secret(
            f"{name}-root",
            metadata=k8s.meta.v1.ObjectMetaArgs(name="minio-root", namespace=args.namespace),
            type="Opaque",
            # keys the chart reads with existingSecret
            string_data={"rootUser": ROOT_USER, "rootPassword": root_password.result},
            opts=in_ns,
        )

        passwords = {
            w: random.RandomPassword(f"{name}-{w}-password", length=40, special=False, opts=child)
            for w in sorted(args.workloads)
        }
        users_secret = k8s.core.v1.Secret(
            f"{name}-users",
            metadata=k8s.meta.v1.ObjectMetaArgs(name="minio-users", namespace=args.namespace),
            type="Opaque",
            string_data={w: p.result for w, p in passwords.items()},
            opts=in_ns,
        )
        self.workload_secret_names = {}
        for w, workload in sorted(args.workloads.items()):
            s = k8s.core.v1.Secret(
                f"{name}-{w}-s3",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=pod_storage_documents.MINIO_SECRET, namespace=workload.namespace
                ),
                type="Opaque",
                string_data={
                    "AWS_ENDPOINT_URL": self.endpoint,
                    "AWS_REGION": args.region,
                    "AWS_ACCESS_KEY_ID": f"aiplat-{w}",
                    "AWS_SECRET_ACCESS_KEY": passwords[w].result,
                },
                opts=child,
            )
            self.workload_secret_names[w] = s.metadata.name
            # The CA that signs MinIO's certificate, for the workload to trust: a Certificate from the same
            # ClusterIssuer in the workload's namespace. cert-manager's CA issuer writes the issuing CA into
            # the Secret's ca.crt (https://cert-manager.io/docs/configuration/ca/), and renews it, without a
            # copy of the root's Secret or another controller (trust-manager). The key pair it also holds
            # authenticates nothing: MinIO asks no client certificate.
            certificate(
                f"{name}-{w}-ca",
                namespace=workload.namespace,
                secret=CA_SECRET,
                issuer=args.tls_issuer,
                names={"commonName": f"aiplat-{w}-minio-trust"},
                opts=child,
            )

        # cert-manager issues and renews the serving certificate; the chart mounts the Secret.
        # https://cert-manager.io/docs/usage/certificate/
        cert = certificate(
            f"{name}-certificate",
            namespace=args.namespace,
            secret=TLS_SECRET,
            issuer=args.tls_issuer,
            names={
                "dnsNames": [
                    f"{RELEASE}.{args.namespace}.svc",
                    f"{RELEASE}.{args.namespace}.svc.cluster.local",
                    # the headless service of distributed mode: pods talk to each other over TLS too
                    f"*.{RELEASE}-svc.{args.namespace}.svc.cluster.local",
                ]
            },
            opts=in_ns,
        )

        values = {
            "mode": args.mode,
            "replicas": args.replicas,
            "existingSecret": "minio-root",
            # replaces chart 5.4.0's requests.memory: 16Gi (rule minio-fits-system-pools checks the fit)
            "resources": {k: dict(v) for k, v in args.resources.items()},
            **({"affinity": nodes.pool_affinity(args.pools)} if args.pools else {}),
            "tls": {
                "enabled": True,
                "certSecret": TLS_SECRET,
                "publicCrt": "tls.crt",
                "privateKey": "tls.key",
            },
            "persistence": {
                "enabled": True,
                "size": args.storage_size,
                **({"storageClass": args.storage_class} if args.storage_class else {}),
            },
            "buckets": [
                {"name": b, "policy": "none", "purge": False, "versioning": True, "objectlocking": False}
                for _, b in sorted(args.buckets.items())
            ],
            "policies": [
                {"name": f"aiplat-{w}", "statements": storage_documents.minio_policy_statements(wl.policy)}
                for w, wl in sorted(args.workloads.items())
            ],
            # Replaces the chart's default user list, which ships a literal password.
            "users": [
                {
                    "accessKey": f"aiplat-{w}",
                    "existingSecret": "minio-users",
                    "existingSecretKey": w,
                    "policy": f"aiplat-{w}",
                }
                for w in sorted(args.workloads)
            ],
        }
        self.release = chart_release(
            f"{name}-release",
            release_name=RELEASE,
            chart=args.chart,
            namespace=args.namespace,
            values=values,
            opts=child_options(self, opts, depends_on=[root, users_secret, cert]),
        )
        self.root_secret_name = root.metadata.name
        self.register_outputs(
            {
                "endpoint": self.endpoint,
                "root_secret_name": self.root_secret_name,
                "workload_secret_names": self.workload_secret_names,
            }
        )
