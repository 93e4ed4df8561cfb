"""The images of every chart the platform installs, by chart and pinned chart version: where the chart's
``values.yaml`` names each image, the upstream image, its tag and, where a stored source records it, its
digest. Data, one entry per image, each with its source and the date it was read (2026-12-02); the digests
are in ``infra/mirror/digests.py`` (written by ``aiplat images resolve``).

The values paths and upstream repositories are read from each chart's ``values.yaml`` at the pinned
version (the repository at the tag or commit named in ``source``). A digest is recorded only where a
source states it for that tag; every other image is a known gap: ``aiplat plan`` warns
(rule ``chart-images-pinned``) and ``aiplat preflight`` refuses the stack (``chart-images-pinned-to-deploy``)
until its digest is recorded in ``digests.py``. Never write a digest you did not read from the registry
or a source. An image whose registry no rule of the stack takes is copied into the stack's ECR by digest
(``aiplat images copy``), so it needs its digest as much as a cached one.

Upgrading a chart is changing its ``version`` in the config and adding its entries here for that version.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from infra.core.instance_types import EFA_PLUGIN_CHART_VERSION, EFA_PLUGIN_IMAGE_TAGS, EFA_PLUGIN_SOURCE
from infra.mirror.digests import DIGESTS


class Style(StrEnum):
    """How a chart's values name an image: one ``repository`` with the registry in it
    (``quay.io/jetstack/cert-manager-controller``), or ``registry`` + ``repository`` (``quay.io`` +
    ``prometheus/prometheus``)."""

    repository = "repository"
    registry = "registry"


@dataclass(frozen=True, kw_only=True)
class Off:
    """The chart never runs the image while its value at ``path`` is ``value`` (``source``: the template
    that says so); our values set it (a plan test checks every release), so the image needs no digest."""

    path: str
    value: bool
    source: str


@dataclass(frozen=True, kw_only=True)
class ImagePin:
    """One image of one chart version.

    ``values``: dotted path of the image's mapping in the chart's values; ``image``: the upstream
    repository with its registry (``docker.io`` for Docker Hub); ``tag``: the tag the chart runs (its
    values or its ``appVersion``); ``digest``: ``sha256:<hex>`` when a source records it, else None;
    ``digest_key``: the key of the image's mapping that takes the digest (None: the chart has none, the
    digest goes after the tag, ``<tag>@sha256:...``); ``set_tag``: write ``tag`` into the values (the
    chart's own default differs from what it publishes, e.g. Kueue's development tags).
    """

    chart: str
    version: str
    values: str
    style: Style
    image: str
    tag: str
    digest: str | None
    digest_key: str | None
    source: str
    date: str = "2026-12-02"
    set_tag: bool = False
    digest_source: str | None = None  # where the digest was read, when it is not ``source``
    off: Off | None = None  # the image never runs under the values we set: no override, no gap


R, G = Style.repository, Style.registry

_CM = "cert-manager/cert-manager@v1.21.1 (24e33194f, 2026-07-29) deploy/charts/cert-manager/values.yaml"
_LBC = "aws/eks-charts@5239609 (2026-08-03) stable/aws-load-balancer-controller/values.yaml"
_EFA = EFA_PLUGIN_SOURCE  # infra/core/data/efa_device_plugin.json (aiplat facts upstream)
_MS = "kubernetes-sigs/metrics-server@metrics-server-helm-chart-3.13.1 charts/metrics-server/values.yaml"
_NV = "NVIDIA/k8s-device-plugin@v0.20.0 deployments/helm/nvidia-device-plugin/values.yaml"
_DCGM = "NVIDIA/dcgm-exporter@4.5.3-4.8.2 (691c927) deployment/values.yaml"
_FB = "fluent/helm-charts@fluent-bit-0.58.1 charts/fluent-bit/values.yaml"
_KEDA = "kedacore/charts@v2.20.2 keda/values.yaml"
_FSX = (
    "kubernetes-sigs/aws-fsx-csi-driver@helm-chart-aws-fsx-csi-driver-1.17.0 "
    "charts/aws-fsx-csi-driver/values.yaml"
)
_TR = "kubeflow/trainer@v2.3.0 (658725bda) charts/kubeflow-trainer/values.yaml"
_JS = "kubernetes-sigs/jobset@v0.12.0 charts/jobset/values.yaml (subchart of kubeflow-trainer 2.3.0)"
_KQ = "kubernetes-sigs/kueue@v0.19.2 charts/kueue/values.yaml; tag: Chart.yaml appVersion v0.19.2"
_KPS = (
    "prometheus-community/helm-charts@kube-prometheus-stack-88.5.3 charts/kube-prometheus-stack/values.yaml"
)
_KSM = "prometheus-community/helm-charts@kube-state-metrics-8.4.0 (subchart of kube-prometheus-stack 88.5.3)"
_OC = "opencost/opencost-helm-chart@opencost-2.5.17 (725bb93, 2026-04-28) charts/opencost/values.yaml"
# the chart's templates write "{{ repository }}:{{ tag }}": no digest key, the digest goes after the tag
_MINIO = "minio/minio@43a74029 (update helm release v5.4.0, 2025-01-02) helm/minio/values.yaml"
_NE = (
    "prometheus-community/helm-charts@prometheus-node-exporter-4.56.1 "
    "(subchart of kube-prometheus-stack 88.5.3)"
)
_GF = (
    "grafana-community/helm-charts@grafana-12.11.1 charts/grafana/values.yaml "
    "(subchart of kube-prometheus-stack 88.5.3)"
)
_KARP = (
    "aws/karpenter-provider-aws c88abbbad 'Stable Release updates Release v1.14.1.' (2026-08-21) "
    "charts/karpenter/values.yaml controller.image.digest"
)

_PINS: tuple[ImagePin, ...] = (
    # cert-manager: image.repository is the full repository override (values.yaml comments, v1.21.1);
    # tag defaults to appVersion (the chart is released with the tag's version)
    *(
        ImagePin(
            chart="cert-manager",
            version="v1.21.1",
            values=path,
            style=R,
            image=f"quay.io/jetstack/{name}",
            tag="v1.21.1",
            digest=None,
            digest_key="digest",
            source=_CM,
        )
        for path, name in (
            ("image", "cert-manager-controller"),
            ("webhook.image", "cert-manager-webhook"),
            ("cainjector.image", "cert-manager-cainjector"),
            ("acmesolver.image", "cert-manager-acmesolver"),
            ("startupapicheck.image", "cert-manager-startupapicheck"),
        )
    ),
    ImagePin(
        chart="aws-load-balancer-controller",
        version="3.5.0",
        values="image",
        style=R,
        image="public.ecr.aws/eks/aws-load-balancer-controller",
        tag="v3.5.0",
        digest=None,
        digest_key=None,
        source=_LBC,
    ),
    # EKS's own ECR account: no pull through cache rule of ours takes it; copied (``aiplat images copy``)
    ImagePin(
        chart="aws-efa-k8s-device-plugin",
        version=EFA_PLUGIN_CHART_VERSION,
        values="image",
        style=R,
        image="602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin",
        tag=EFA_PLUGIN_IMAGE_TAGS[EFA_PLUGIN_CHART_VERSION],
        digest=None,
        digest_key=None,
        source=_EFA,
    ),
    ImagePin(
        chart="metrics-server",
        version="3.13.1",
        values="image",
        style=R,
        image="registry.k8s.io/metrics-server/metrics-server",
        tag="v0.8.1",
        digest=None,
        digest_key=None,
        source=_MS,
    ),
    ImagePin(
        chart="metrics-server",
        version="3.13.1",
        values="addonResizer.image",
        style=R,
        image="registry.k8s.io/autoscaling/addon-resizer",
        tag="1.8.23",
        digest=None,
        digest_key=None,
        source=_MS,
    ),
    # nvcr.io is no upstream a pull through cache rule takes (AWS's list): copied
    ImagePin(
        chart="nvidia-device-plugin",
        version="0.20.0",
        values="image",
        style=R,
        image="nvcr.io/nvidia/k8s-device-plugin",
        tag="v0.20.0",
        digest=None,
        digest_key=None,
        source=_NV,
    ),
    ImagePin(
        chart="dcgm-exporter",
        version="4.8.2",
        values="image",
        style=R,
        image="nvcr.io/nvidia/k8s/dcgm-exporter",
        tag="4.5.3-4.8.2-distroless",
        digest=None,
        digest_key=None,
        source=_DCGM,
    ),
    # cr.fluentbit.io is no upstream a rule takes: copied
    ImagePin(
        chart="fluent-bit",
        version="0.58.1",
        values="image",
        style=R,
        image="cr.fluentbit.io/fluent/fluent-bit",
        tag="5.1.1",
        digest=None,
        digest_key="digest",
        source=_FB,
    ),
    ImagePin(
        chart="fluent-bit",
        version="0.58.1",
        values="hotReload.image",
        style=R,
        image="ghcr.io/jimmidyson/configmap-reload",
        tag="v0.15.0",
        digest=None,
        digest_key="digest",
        source=_FB,
    ),
    *(
        ImagePin(
            chart="keda",
            version="2.20.2",
            values=f"image.{key}",
            style=G,
            image=f"ghcr.io/kedacore/{name}",
            tag="2.20.2",
            digest=None,
            digest_key=None,
            source=_KEDA,
        )
        for key, name in (
            ("keda", "keda"),
            ("metricsApiServer", "keda-metrics-apiserver"),
            ("webhooks", "keda-admission-webhooks"),
        )
    ),
    *(
        ImagePin(
            chart="aws-fsx-csi-driver",
            version="1.17.0",
            values=path,
            style=R,
            image=f"public.ecr.aws/{name}",
            tag=tag,
            digest=None,
            digest_key=None,
            source=_FSX,
        )
        for path, name, tag in (
            ("image", "fsx-csi-driver/aws-fsx-csi-driver", "v1.9.0"),
            ("sidecars.livenessProbe.image", "csi-components/livenessprobe", "v2.18.0-eksbuild.3"),
            (
                "sidecars.nodeDriverRegistrar.image",
                "csi-components/csi-node-driver-registrar",
                "v2.16.0-eksbuild.3",
            ),
            ("sidecars.provisioner.image", "csi-components/csi-provisioner", "v6.2.0-eksbuild.2"),
            ("sidecars.resizer.image", "csi-components/csi-resizer", "v2.1.0-eksbuild.3"),
        )
    ),
    ImagePin(
        chart="karpenter",
        version="1.14.1",
        values="controller.image",
        style=R,
        image="public.ecr.aws/karpenter/controller",
        tag="1.14.1",
        digest="sha256:445baefaaa689029cc12ac1f659b916b0b82fb14308ce536f8521fcf079116fa",
        digest_key="digest",
        source=_KARP,
    ),
    ImagePin(
        chart="kubeflow-trainer",
        version="2.3.0",
        values="image",
        style=G,
        image="ghcr.io/kubeflow/trainer/trainer-controller-manager",
        tag="v2.3.0",
        digest=None,
        digest_key=None,
        source=_TR,
    ),
    ImagePin(
        chart="kubeflow-trainer",
        version="2.3.0",
        values="jobset.image",
        style=R,
        image="registry.k8s.io/jobset/jobset",
        tag="v0.12.0",
        digest=None,
        digest_key=None,
        source=_JS,
        set_tag=True,
    ),
    *(
        ImagePin(
            chart="kueue",
            version="0.19.2",
            values=path,
            style=R,
            image=f"registry.k8s.io/kueue/{name}",
            tag="v0.19.2",
            digest=None,
            digest_key=None,
            source=_KQ,
            set_tag=True,
        )
        for path, name in (
            ("controllerManager.manager.image", "kueue"),
            ("kueueViz.backend.image", "kueueviz-backend"),
            ("kueueViz.frontend.image", "kueueviz-frontend"),
        )
    ),
    # kube-prometheus-stack and its subcharts: registry + repository, digest in ``sha`` (hex only)
    *(
        ImagePin(
            chart="kube-prometheus-stack",
            version="88.5.3",
            values=path,
            style=G,
            image=image,
            tag=tag,
            digest=None,
            digest_key="sha",
            source=source,
        )
        for path, image, tag, source in (
            ("alertmanager.alertmanagerSpec.image", "quay.io/prometheus/alertmanager", "v0.34.0", _KPS),
            ("prometheusOperator.image", "quay.io/prometheus-operator/prometheus-operator", "v0.93.1", _KPS),
            (
                "prometheusOperator.admissionWebhooks.deployment.image",
                "quay.io/prometheus-operator/admission-webhook",
                "v0.93.1",
                _KPS,
            ),
            (
                "prometheusOperator.admissionWebhooks.patch.image",
                "ghcr.io/jkroepke/kube-webhook-certgen",
                "1.8.7",
                _KPS,
            ),
            (
                "prometheusOperator.prometheusConfigReloader.image",
                "quay.io/prometheus-operator/prometheus-config-reloader",
                "v0.93.1",
                _KPS,
            ),
            ("prometheus.prometheusSpec.image", "quay.io/prometheus/prometheus", "v3.14.0-distroless", _KPS),
            (
                "kube-state-metrics.image",
                "registry.k8s.io/kube-state-metrics/kube-state-metrics",
                "v2.20.0",
                _KSM,
            ),
            ("grafana.image", "docker.io/grafana/grafana", "13.2.0", _GF),
            ("grafana.sidecar.image", "quay.io/kiwigrid/k8s-sidecar", "2.10.1", _GF),
            ("grafana.initChownData.image", "docker.io/library/busybox", "1.38.0", _GF),
            ("grafana.downloadDashboardsImage", "docker.io/curlimages/curl", "8.21.0", _GF),
        )
    ),
    # prometheus-node-exporter names its digest ``image.digest`` (the whole 'sha256:...'), not ``sha``
    # (prometheus-community/helm-charts@019319902 charts/prometheus-node-exporter/values.yaml)
    ImagePin(
        chart="kube-prometheus-stack",
        version="88.5.3",
        values="prometheus-node-exporter.image",
        style=G,
        image="quay.io/prometheus/node-exporter",
        tag="v1.12.1",
        digest=None,
        digest_key="digest",
        source=_NE,
    ),
    # OpenCost: registry + repository; the digest goes after the tag ("1.120.1@sha256:..."), as the chart's
    # own values pin it and its templates write it (templates/_helpers.tpl opencost.fullImageName)
    *(
        ImagePin(
            chart="opencost",
            version="2.5.17",
            values=path,
            style=G,
            image=image,
            tag="1.120.1",
            digest=None,
            digest_key=None,
            source=_OC,
            date="2026-12-06",
        )
        for path, image in (
            ("opencost.exporter.image", "ghcr.io/opencost/opencost"),
            ("opencost.ui.image", "ghcr.io/opencost/opencost-ui"),
        )
    ),
    # MinIO (storage.backend minio): the server, and mc in the post-install job that makes the buckets,
    # policies and users
    *(
        ImagePin(
            chart="minio",
            version="5.4.0",
            values=path,
            style=R,
            image=image,
            tag=tag,
            digest=None,
            digest_key=None,
            source=_MINIO,
            date="2026-12-03",
        )
        for path, image, tag in (
            ("image", "quay.io/minio/minio", "RELEASE.2024-12-18T13-15-44Z"),
            ("mcImage", "quay.io/minio/mc", "RELEASE.2024-11-21T17-21-54Z"),
        )
    ),
)


def _with_digest(pin: ImagePin) -> ImagePin:
    found = DIGESTS.get((pin.image, pin.tag))
    if found is None or pin.digest is not None:
        return pin
    return replace(pin, digest=found.digest, digest_source=f"{found.source} (read {found.read})")


_KPS_WEBHOOKS = (
    "prometheus-community/helm-charts@kube-prometheus-stack-88.5.3 charts/kube-prometheus-stack/templates/"
    "prometheus-operator/admission-webhooks/"
)
# Images a chart runs only under a value our values switch off (infra/monitoring/documents.py,
# infra/opencost/documents.py). OpenCost's plugin installer (plugins.install.fullImageName) and SigV4
# proxy (opencost.sigV4Proxy.image) are no image mappings and run only with plugins.enabled /
# prometheus.amp.enabled, both false in our values.
_OFF: dict[tuple[str, str, str], Off] = {
    ("kube-prometheus-stack", "88.5.3", "prometheusOperator.admissionWebhooks.patch.image"): Off(
        path="prometheusOperator.admissionWebhooks.enabled",
        value=False,
        source=_KPS_WEBHOOKS + "job-patch/job-createSecret.yaml and job-patchWebhook.yaml",
    ),
    ("kube-prometheus-stack", "88.5.3", "prometheusOperator.admissionWebhooks.deployment.image"): Off(
        path="prometheusOperator.admissionWebhooks.deployment.enabled",
        value=False,
        source=_KPS_WEBHOOKS + "deployment/deployment.yaml",
    ),
    ("opencost", "2.5.17", "opencost.ui.image"): Off(
        path="opencost.ui.enabled",
        value=False,
        source="opencost/opencost-helm-chart@opencost-2.5.17 charts/opencost/templates/deployment.yaml",
    ),
    ("kube-prometheus-stack", "88.5.3", "grafana.initChownData.image"): Off(
        path="grafana.initChownData.enabled",
        value=False,
        source="grafana-community/helm-charts@grafana-12.11.1 charts/grafana/templates/_pod.tpl",
    ),
}


def _finished(pin: ImagePin) -> ImagePin:
    pin = _with_digest(pin)
    off = _OFF.get((pin.chart, pin.version, pin.values))
    return pin if off is None else replace(pin, off=off)


PINS: tuple[ImagePin, ...] = tuple(_finished(p) for p in _PINS)

# Charts that run no image (their values.yaml names none): CRDs only.
NO_IMAGES: frozenset[tuple[str, str]] = frozenset(
    {
        # prometheus-community/helm-charts@prometheus-operator-crds-31.0.1 charts/prometheus-operator-crds
        ("prometheus-operator-crds", "31.0.1"),
        # aws/karpenter-provider-aws@v1.14.1 charts/karpenter-crd (templates are the CRDs)
        ("karpenter-crd", "1.14.1"),
    }
)
