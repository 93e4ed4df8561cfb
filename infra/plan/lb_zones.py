"""The Route 53 hosted zone of each region's load balancers: what ``aws.lb.get_hosted_zone_id`` answers.

The provider answers from a table, not from an API (no call returns a region's zone without a load
balancer): terraform-provider-aws ``internal/service/elbv2/hosted_zone_id_data_source.go``
(``hostedZoneIDPerRegionALBMap`` and ``...NLBMap``), which pulumi-aws bridges, copied from AWS's "Elastic
Load Balancing endpoints and quotas" page, https://docs.aws.amazon.com/general/latest/gr/elb.html#elb_region
(its "Route 53 Hosted Zone ID" columns; the rows of us-*, af-south-1, ap-east-1 and ap-south-2 checked
against a stored copy of the page, read 2026-12-06). Every region ``infra/io/regions.py`` accepts has a row;
a region neither source lists yet (ap-east-2, ap-southeast-6 as read 2026-12-06) has ``None``, and the plan
refuses it in one line (the provider refuses it too: "unsupported AWS Region").
"""

from __future__ import annotations

from typing import NamedTuple


class LbZones(NamedTuple):
    """A region's canonical hosted zones: Application (and Classic) Load Balancers, Network Load Balancers."""

    application: str | None
    network: str | None


LB_HOSTED_ZONES: dict[str, LbZones] = {
    "af-south-1": LbZones("Z268VQBMOI5EKX", "Z203XCE67M25HM"),
    "ap-east-1": LbZones("Z3DQVH9N71FHZ0", "Z12Y7K3UBGUAD1"),
    "ap-east-2": LbZones(None, None),
    "ap-northeast-1": LbZones("Z14GRHDCWA56QT", "Z31USIVHYNEOWT"),
    "ap-northeast-2": LbZones("ZWKZPGTI48KDX", "ZIBE1TIR4HY56"),
    "ap-northeast-3": LbZones("Z5LXEXXYW11ES", "Z1GWIQ4HH19I5X"),
    "ap-south-1": LbZones("ZP97RAFLXTNZK", "ZVDDRBQ08TROA"),
    "ap-south-2": LbZones("Z0173938T07WNTVAEPZN", "Z0711778386UTO08407HT"),
    "ap-southeast-1": LbZones("Z1LMS91P8CMLE5", "ZKVM4W9LS7TM"),
    "ap-southeast-2": LbZones("Z1GM3OXH4ZPM65", "ZCT6FZBF4DROD"),
    "ap-southeast-3": LbZones("Z08888821HLRG5A9ZRTER", "Z01971771FYVNCOVWJU1G"),
    "ap-southeast-4": LbZones("Z09517862IB2WZLPXG76F", "Z01156963G8MIIL7X90IV"),
    "ap-southeast-5": LbZones("Z06010284QMVVW7WO5J", "Z026317210H9ACVTRO6FB"),
    "ap-southeast-6": LbZones(None, None),
    "ap-southeast-7": LbZones("Z0390008CMBRTHFGWBCB", "Z054363131YWATEMWRG5L"),
    "ca-central-1": LbZones("ZQSVJUPU6J1EY", "Z2EPGBW3API2WT"),
    "ca-west-1": LbZones("Z06473681N0SF6OS049SD", "Z02754302KBB00W2LKWZ9"),
    "eu-central-1": LbZones("Z215JYRZR1TBD5", "Z3F0SRJ5LGBH90"),
    "eu-central-2": LbZones("Z06391101F2ZOEP8P5EB3", "Z02239872DOALSIDCX66S"),
    "eu-north-1": LbZones("Z23TAZ6LKFMNIO", "Z1UDT6IFJ4EJM"),
    "eu-south-1": LbZones("Z3ULH7SSC9OV64", "Z23146JA1KNAFP"),
    "eu-south-2": LbZones("Z0956581394HF5D5LXGAP", "Z1011216NVTVYADP1SSV"),
    "eu-west-1": LbZones("Z32O12XQLNTSW2", "Z2IFOLAFXWLO4F"),
    "eu-west-2": LbZones("ZHURV8PSTC4K8", "ZD4D7Y8KGAS4G"),
    "eu-west-3": LbZones("Z3Q77PNBQS71R4", "Z1CMS0P5QUZ6D5"),
    "il-central-1": LbZones("Z09170902867EHPV2DABU", "Z0313266YDI6ZRHTGQY4"),
    "me-central-1": LbZones("Z08230872XQRWHG2XF6I", "Z00282643NTTLPANJJG2P"),
    "me-south-1": LbZones("ZS929ML54UICD", "Z3QSRYVP46NYYV"),
    "mx-central-1": LbZones("Z023552324OKD1BB28BH5", "Z02031231H3ID6HYJ9A7U"),
    "sa-east-1": LbZones("Z2P70J7HTTTPLU", "ZTK26PT1VY4CU"),
    "us-east-1": LbZones("Z35SXDOTRQ7X7K", "Z26RNL4JYFTOTI"),
    "us-east-2": LbZones("Z3AADJGX6KTTL2", "ZLMOA37VPKANP"),
    "us-west-1": LbZones("Z368ELLRRE2KJ0", "Z24FKFUX50B4VW"),
    "us-west-2": LbZones("Z1H1FL5HABSF5", "Z18D5FSROUN65G"),
}
