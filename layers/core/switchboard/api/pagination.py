"""Pagination for route handlers: the cursors and list metadata of `switchboard.paging`, under their API name."""

from switchboard.paging import cursor_page, decode_cursor, encode_cursor, list_meta, query_fingerprint, read_page

__all__ = ["cursor_page", "decode_cursor", "encode_cursor", "list_meta", "query_fingerprint", "read_page"]
