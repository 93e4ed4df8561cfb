"""Digests of the charts' images (their multi-platform indexes), by (upstream image, tag), each with where it
was read and when. ``infra/mirror/pins.py`` takes each pin's digest from here; a pin with none is a known
gap (``aiplat plan`` warns, ``aiplat preflight`` refuses the stack).

Written by ``aiplat images resolve`` (``infra/ops/images.py`` renders the table below this head, which it
keeps; a test holds the table to that form): it reads each digest from the registry with ``crane digest
<image>:<tag>``, and ``--check`` compares the recorded ones. Edit the table by hand only in the same form,
and never write a digest you did not read from the registry or a source named in ``source``.

The entries whose source is not the registry come from the stored public sources: a project's own record
where one has it (the kubernetes/k8s.io promoter manifest, a release's image check, NVIDIA's GPU operator
bundle), or else public files that pin the same image and tag, found by exact search
``<image>:<tag>@sha256:`` in the code index (which names no repository for most hits: its file id is given).
Those are recorded only where independent files agree, or where one of them tells the index apart from its
per-platform children; where files disagree (Docker Hub's official images are rebuilt under one tag:
busybox:1.38.0 has three digests) the image stays a gap. A digest names content in the upstream repository
itself: a wrong one fails the pull, it cannot bring another publisher's image. Run ``aiplat images resolve
--check`` before a first deployment.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class RecordedDigest:
    """``digest``: ``sha256:<hex>`` of the tag's index; ``source``: where it was read; ``read``: the date."""

    digest: str
    source: str
    read: str


DIGESTS: dict[tuple[str, str], RecordedDigest] = {
    ("docker.io/curlimages/curl", "8.21.0"): RecordedDigest(
        digest="sha256:7c12af72ceb38b7432ab85e1a265cff6ae58e06f95539d539b654f2cfa64bb13",
        source=(
            "code index files 57016199560, 62657488988, 71437210284, 55480389438, 54489106038, 55079776268"
        ),
        read="2026-12-02",
    ),
    ("docker.io/grafana/grafana", "13.2.0"): RecordedDigest(
        digest="sha256:3fd54ae1214669f8355f065ec9f6445d5279a3d77095ab048ca045685272429b",
        source=(
            "code index files 59862991324 (checked with 'docker buildx imagetools inspect'), 58106546140, "
            "70122309741, 59726388158, 59395445601, 68296839044"
        ),
        read="2026-12-02",
    ),
    ("ghcr.io/kedacore/keda", "2.20.2"): RecordedDigest(
        digest="sha256:fe74c7b8849586a67ad2201bcb89e7f5ac221ff90399ecaa8fd28427f1ef11e6",
        source=(
            "code index file 68336677490 (a book's pins table, read 2026-09-19 there); the file lists each "
            "index digest and its arm64/amd64 children apart"
        ),
        read="2026-12-02",
    ),
    ("ghcr.io/kedacore/keda-admission-webhooks", "2.20.2"): RecordedDigest(
        digest="sha256:41f74102aba7959c6e8d08b433ab8a5fd6cae7c5646c78f7fe3de40a52df3439",
        source="code index file 68336677490",
        read="2026-12-02",
    ),
    ("ghcr.io/kedacore/keda-metrics-apiserver", "2.20.2"): RecordedDigest(
        digest="sha256:27286536a8a775aeeee37a7e343f8ecebb27ebf680ee1181a4f99e82eefb253b",
        source="code index file 68336677490",
        read="2026-12-02",
    ),
    ("ghcr.io/opencost/opencost", "1.120.1"): RecordedDigest(
        digest="sha256:b0701f9b54e43c9abee98f5784792a5b469ca8951e87da32b161c1fa539ab0e1",
        source=(
            "opencost/opencost-helm-chart charts/opencost/values.yaml at opencost-2.5.17 (725bb93): the "
            "chart's own pin, opencost.exporter.image.tag '1.120.1@sha256:...'"
        ),
        read="2026-12-06",
    ),
    ("ghcr.io/opencost/opencost-ui", "1.120.1"): RecordedDigest(
        digest="sha256:7c08640291228fd13854c9aa0538a6fdbcc2410bfbb66177a7a40d2634983c52",
        source=(
            "opencost/opencost-helm-chart charts/opencost/values.yaml at opencost-2.5.17 (725bb93): the "
            "chart's own pin, opencost.ui.image.tag '1.120.1@sha256:...'"
        ),
        read="2026-12-06",
    ),
    ("nvcr.io/nvidia/k8s-device-plugin", "v0.20.0"): RecordedDigest(
        digest="sha256:a61ba9fd8efb82f3a79f877f7580e02c1e8e7593f62473644bc9c79e315c3312",
        source=(
            "NVIDIA/gpu-operator bundle/manifests/gpu-operator-certified.clusterserviceversion.yaml at "
            "v26.7.0; code index files 71401494007 (the index and its amd64 child told apart), 68409741095, "
            "68441749179"
        ),
        read="2026-12-03",
    ),
    ("nvcr.io/nvidia/k8s/dcgm-exporter", "4.5.3-4.8.2-distroless"): RecordedDigest(
        digest="sha256:60d3b00ac80b4ae77f94dae2f943685605585ad9e92fdccda3154d009ae317cc",
        source=(
            "NVIDIA/gpu-operator bundle/manifests/gpu-operator-certified.clusterserviceversion.yaml at "
            "v26.3.2 and v26.3.3; code index files 56621218998, 55465506533, 55220211217, 54501780460"
        ),
        read="2026-12-03",
    ),
    ("public.ecr.aws/eks/aws-load-balancer-controller", "v3.5.0"): RecordedDigest(
        digest="sha256:298acdff5a571731276aaea3d5cc450a264e4ad710a5bddf3e518f68a3f9f6cb",
        source=(
            "code index files 69494492647 and 63049552644 (each names it the index, with its linux/amd64 and "
            "linux/arm64 children); pinned also by 68653383611, 69061145573, 58606861397, 58594091971, "
            "58513128650"
        ),
        read="2026-12-03",
    ),
    ("quay.io/jetstack/cert-manager-acmesolver", "v1.21.1"): RecordedDigest(
        digest="sha256:dbc7cc1354f603918e7c5af7f55a0a620537394452c93a565bde75c6f48e8837",
        source="code index file 59762507032 (the same file's other four agree with the files above)",
        read="2026-12-02",
    ),
    ("quay.io/jetstack/cert-manager-cainjector", "v1.21.1"): RecordedDigest(
        digest="sha256:ccf6b919ec0500745a47a910118f834f9636d0aac1ff221245cd2557ed8c7c98",
        source="code index files 59762507032, 59659913026, 59660942361, 61514179256, 66475940618",
        read="2026-12-02",
    ),
    ("quay.io/jetstack/cert-manager-controller", "v1.21.1"): RecordedDigest(
        digest="sha256:416a2d76870d996460e62bd7f521bf14fa017be9e3e904aab92163a331fcb61a",
        source=(
            "code index files 59762507032, 59659913026, 59660942361, 61514179256, 66475940618; one other "
            "file (59473945169) records sha256:4c2b5201..., likely one platform's manifest: the five files "
            "agree on this one"
        ),
        read="2026-12-02",
    ),
    ("quay.io/jetstack/cert-manager-startupapicheck", "v1.21.1"): RecordedDigest(
        digest="sha256:d8ab6416e6e7303a86fa0a8daa82c94a8001f21c9d78eb2e7db20534e5d07ae8",
        source="code index files 59762507032, 66475940618",
        read="2026-12-02",
    ),
    ("quay.io/jetstack/cert-manager-webhook", "v1.21.1"): RecordedDigest(
        digest="sha256:d8b3961b51c8c7320633f8208dc46bf88aa13804d0f7cbe48a096b2c523cee42",
        source="code index files 59762507032, 59659913026, 59660942361, 61514179256, 66475940618",
        read="2026-12-02",
    ),
    ("quay.io/kiwigrid/k8s-sidecar", "2.10.1"): RecordedDigest(
        digest="sha256:7eac5c4fed714a18d038fc9fea57d8744d113367935dac0ea4eb6a87cef704a3",
        source=(
            "code index files 61958077870, 65755726862, 63091202156 (59148566226's 440db6dc..., an "
            "amd64-only lock, is the linux/amd64 child)"
        ),
        read="2026-12-03",
    ),
    ("quay.io/minio/mc", "RELEASE.2024-11-21T17-21-54Z"): RecordedDigest(
        digest="sha256:993e8c454a7ec632923f7e3e61adf1d473261da6354cefd641aedd33a2cfe112",
        source=(
            "code index files 43683287874 (a Nix pullImage of the tag), 58557851796 and 58688048527 (a "
            "reviewed registry digest), 70963545881; none says whether it is the index or the amd64 manifest"
        ),
        read="2026-12-03",
    ),
    ("quay.io/minio/minio", "RELEASE.2024-12-18T13-15-44Z"): RecordedDigest(
        digest="sha256:1dce27c494a16bae114774f1cec295493f3613142713130c2d22dd5696be6ad3",
        source=(
            "code index files 68849933013, 69399580012, 70720667872, 57923832854 (four projects pull it by "
            "this digest); 70213069184 names 34c8e2f5... (58635062464, 59339599055) the index's amd64 entry"
        ),
        read="2026-12-03",
    ),
    ("quay.io/prometheus-operator/prometheus-config-reloader", "v0.93.1"): RecordedDigest(
        digest="sha256:428f088fe6fe07ab138bda92113664b04848a1dc408e4d3680a60ecdb55d1a65",
        source=(
            "Stuhlmuller/homelab research note for its issue #926 (index id 62053750901): 'Immutable index "
            "references and their Linux/amd64 child manifests'"
        ),
        read="2026-12-02",
    ),
    ("quay.io/prometheus-operator/prometheus-operator", "v0.93.1"): RecordedDigest(
        digest="sha256:e52bb28fd41c98dd407c7a8cba8bdcfe7eabd7447e250afaf1fe7bb816dedbff",
        source=(
            "Stuhlmuller/homelab research note for its issue #926 (index id 62053750901): 'Immutable index "
            "references and their Linux/amd64 child manifests'"
        ),
        read="2026-12-02",
    ),
    ("quay.io/prometheus/alertmanager", "v0.34.0"): RecordedDigest(
        digest="sha256:690c7b525f4367aa91f73e2f91c632206d32e97c6384bdbf2fb7a861b420340d",
        source=(
            "Stuhlmuller/homelab research note for its issue #926 (index id 62053750901): 'Immutable index "
            "references and their Linux/amd64 child manifests'; also 59763246006 ('Quay manifest-list "
            "digest') and others"
        ),
        read="2026-12-02",
    ),
    ("quay.io/prometheus/node-exporter", "v1.12.1"): RecordedDigest(
        digest="sha256:1b4e4438faca4dd7e001dd445d161a4a2091b0fededa84093b3a8dfeae1f1be0",
        source=(
            "code index file 70138857442 (`docker buildx imagetools inspect --raw` of the tag: the index and "
            "its amd64/arm64 children); the same index for prom/node-exporter:v1.12.1 in 71335358529, "
            "70277595699, 70358430324 and more; 8c9bac11... (69431666618) is the v1.12.1-distroless index"
        ),
        read="2026-12-03",
    ),
    ("quay.io/prometheus/prometheus", "v3.14.0-distroless"): RecordedDigest(
        digest="sha256:50c707e96da5ade383cb1707790576480485e93de06aa60ad8802cb5f744bd0a",
        source=(
            "Stuhlmuller/homelab research note for its issue #926 (index id 62053750901): 'Immutable index "
            "references and their Linux/amd64 child manifests'; also code index files 66694621922, "
            "62455956671, 68517162436"
        ),
        read="2026-12-02",
    ),
    ("registry.k8s.io/autoscaling/addon-resizer", "1.8.23"): RecordedDigest(
        digest="sha256:a02cd9b5bc8cb22518e3b26fcd03a3157336ac83e39967d7cd0bb159f67ec9fa",
        source=(
            "kubernetes/k8s.io registry.k8s.io/images/k8s-staging-autoscaling/images.yaml at fe84f3f6 (the "
            "promoter's manifest, addon-resizer 1.8.23; its -amd64/-arm64 entries are the children)"
        ),
        read="2026-12-03",
    ),
    ("registry.k8s.io/jobset/jobset", "v0.12.0"): RecordedDigest(
        digest="sha256:e75536f1135b7bb2f19f8c3b620782fbdd9091d73398e3a272f9a5fed322980d",
        source="code index files 63640513475, 63143510960, 63386304936, 63167427347, 63091530155",
        read="2026-12-02",
    ),
    ("registry.k8s.io/kube-state-metrics/kube-state-metrics", "v2.20.0"): RecordedDigest(
        digest="sha256:42cfe3723a5f058171c627537fb57a3ea0f26e4380fa18555a95cb1a1b4cfc5b",
        source=(
            "Stuhlmuller/homelab research note for its issue #926 (index id 62053750901): 'Immutable index "
            "references and their Linux/amd64 child manifests'; also code index file 71400200972; "
            "69094724990 records sha256:01171220..., which the note names this index's amd64 child"
        ),
        read="2026-12-02",
    ),
    ("registry.k8s.io/kueue/kueue", "v0.19.2"): RecordedDigest(
        digest="sha256:8a77be2df3d441d1a99b60eb1625c835b5f4feda5db02ece26818cf2a30c4d86",
        source=(
            "kubernetes-sigs/kueue issue #14323 (Release v0.19.2: the release's /wait-for-images check), "
            "promoted by digest in kubernetes/k8s.io#9856"
        ),
        read="2026-12-03",
    ),
    ("registry.k8s.io/kueue/kueueviz-backend", "v0.19.2"): RecordedDigest(
        digest="sha256:1b28a79b8498041148b32a9d7eff2aca524b781df2a72df6461307180ed8b061",
        source=(
            "kubernetes-sigs/kueue issue #14323 (Release v0.19.2: the release's /wait-for-images check), "
            "promoted by digest in kubernetes/k8s.io#9856"
        ),
        read="2026-12-03",
    ),
    ("registry.k8s.io/kueue/kueueviz-frontend", "v0.19.2"): RecordedDigest(
        digest="sha256:b17fe075ac9ecf156bd0ad47f9f752dc7ba309bb9a8e54071df5728fb3c8f6e4",
        source=(
            "kubernetes-sigs/kueue issue #14323 (Release v0.19.2: the release's /wait-for-images check), "
            "promoted by digest in kubernetes/k8s.io#9856"
        ),
        read="2026-12-03",
    ),
    ("registry.k8s.io/metrics-server/metrics-server", "v0.8.1"): RecordedDigest(
        digest="sha256:b2d2efaf5ac3b366ed0f839d2412a2c4279d4fc2a2a733f12c52133faed36c41",
        source=(
            "code index files 63413828504, 69205322350, 68361284524; 63413828504 is 'Images pinned by "
            "minikube 1.38.1 addons'; one other file (68762442623) records sha256:6231fb0a..."
        ),
        read="2026-12-02",
    ),
}
