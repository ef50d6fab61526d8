from ledgerly.utils.text import normalize_email, slugify


def test_slugify_strips_accents():
    assert slugify("Café Ünïon") == "cafe-union"


def test_slugify_empty():
    assert slugify("!!!") == "untitled"


def test_normalize_email_lowercases_domain_only():
    assert normalize_email("  Ann.Lee@Example.COM ") == "Ann.Lee@example.com"
