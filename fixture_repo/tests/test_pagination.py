import pytest

from ledgerly.utils.pagination import MAX_PER_PAGE, PaginationError, check_page

# TODO: tests for Page (pages, has_next, has_previous, to_dict) and parse_page_args.


def test_check_page_rejects_page_zero():
    with pytest.raises(PaginationError):
        check_page(0, 10)


def test_check_page_rejects_oversized_pages():
    with pytest.raises(PaginationError):
        check_page(1, MAX_PER_PAGE + 1)
