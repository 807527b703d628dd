"""A small corpus whose best answers do not all rank first, so the loop has to page."""

from __future__ import annotations

from corrective_rag.types import Document

QUESTION = "How do honey bees make honey from nectar?"

CORPUS = [
    Document("bees", "Honey bees make honey from flower nectar they collect.", {"kind": "bee"}),
    Document("hive", "Bees store nectar in wax cells, where honey ripens.", {"kind": "bee"}),
    Document("nectar", "Nectar becomes honey as bees fan it and add enzymes.", {"kind": "bee"}),
    Document("bumble", "Bumblebees pollinate tomatoes in greenhouses.", {"kind": "bee"}),
    Document(
        "flowers", "Flowers attract pollinating insects with colour and scent.", {"kind": "plant"}
    ),
    Document("syrup", "Maple syrup is boiled down from the sap of maple trees.", {"kind": "food"}),
    Document("wasp", "Wasps hunt insects and build paper nests.", {"kind": "insect"}),
    Document("sugar", "Sugar cane is crushed and its juice crystallised.", {"kind": "food"}),
    Document("bread", "Bread dough rises with yeast.", {"kind": "food"}),
    Document("ants", "Ants farm aphids for their sweet honeydew.", {"kind": "insect"}),
]
