"""Range reads that page through a key range with the server's page token."""

from __future__ import annotations

import collections
import dataclasses
from typing import Callable, Deque, Iterator, List, Optional

from cowkv.values import Key, KeyValue, opt_bytes
from cowkv.v1 import kv_pb2

__all__ = ["RangeIterator", "RangePage", "RangePager", "range_request"]


def range_request(subvolume: str, start: Optional[Key], end: Optional[Key],
                  prefix: Optional[Key], reverse: bool, keys_only: bool, count_only: bool,
                  snapshot: str) -> kv_pb2.RangeRequest:
    """A first-page RangeRequest; None bounds are open."""
    return kv_pb2.RangeRequest(subvolume=subvolume, start=opt_bytes(start), end=opt_bytes(end),
                               prefix=opt_bytes(prefix), reverse=reverse, keys_only=keys_only,
                               count_only=count_only, snapshot=snapshot)


@dataclasses.dataclass(frozen=True)
class RangePage:
    """One page of a range read (cowkv.v1.RangeResponse)."""

    kvs: List[KeyValue]
    count: int  # keys from this page's start: exact for count_only or the last page
    more: bool  # more keys follow this page
    next_page_token: bytes  # pass as page_token for the next page; empty when not more
    revision: int  # store revision the page was read at

    @classmethod
    def from_proto(cls, m: kv_pb2.RangeResponse) -> "RangePage":
        return cls([KeyValue.from_proto(kv) for kv in m.kvs], int(m.count), bool(m.more),
                   bytes(m.next_page_token), int(m.revision))


class RangePager:
    """The paging state of a range read, without I/O: :meth:`next_request`
    gives the request of the next page (None when done), :meth:`absorb` takes
    its answer. Shared by :class:`RangeIterator` and cowkv.aio's iterator.

    ``limit`` caps the keys yielded in all (0 = no cap); ``page_size`` the
    keys per call (0 = the server's page limit, 10,000). After each page,
    ``revision`` is the store revision that page was read at."""

    def __init__(self, request: kv_pb2.RangeRequest, limit: int = 0, page_size: int = 0) -> None:
        if limit < 0 or page_size < 0:
            raise ValueError("limit and page_size must be >= 0")
        self._request = request
        self._limit = limit
        self._page_size = page_size
        self._buffer: Deque[KeyValue] = collections.deque()
        self._yielded = 0
        self._done = False
        self.revision: Optional[int] = None
        self.pages = 0

    def pop(self) -> Optional[KeyValue]:
        """The next buffered key, or None (then call :meth:`next_request`)."""
        if (self._limit and self._yielded >= self._limit) or not self._buffer:
            return None
        self._yielded += 1
        return self._buffer.popleft()

    def next_request(self) -> Optional[kv_pb2.RangeRequest]:
        """The request of the next page, or None when the range is done."""
        if self._done or (self._limit and self._yielded >= self._limit):
            return None
        remaining = self._limit - self._yielded if self._limit else 0
        sizes = [n for n in (remaining, self._page_size) if n > 0]
        self._request.limit = min(sizes) if sizes else 0
        return self._request

    def absorb(self, resp: kv_pb2.RangeResponse) -> None:
        """Takes a page's answer."""
        self.pages += 1
        self.revision = int(resp.revision)
        self._buffer = collections.deque(KeyValue.from_proto(m) for m in resp.kvs)
        if resp.more and resp.next_page_token:
            self._request.page_token = resp.next_page_token
        else:
            self._done = True


class RangeIterator(RangePager, Iterator[KeyValue]):
    """Iterates the keys of a range, fetching one page per call as it goes
    (``limit``, ``page_size``, ``revision``: :class:`RangePager`). Pages of a
    live subvolume are each consistent at their own revision; read a
    read-only snapshot for one view across pages.
    """

    def __init__(self, fetch: Callable[[kv_pb2.RangeRequest], kv_pb2.RangeResponse],
                 request: kv_pb2.RangeRequest, limit: int = 0, page_size: int = 0) -> None:
        super().__init__(request, limit, page_size)
        self._fetch = fetch

    def __iter__(self) -> "RangeIterator":
        return self

    def __next__(self) -> KeyValue:
        while True:
            kv = self.pop()
            if kv is not None:
                return kv
            req = self.next_request()
            if req is None:
                raise StopIteration
            self.absorb(self._fetch(req))

    def to_list(self) -> List[KeyValue]:
        """The remaining keys as a list."""
        return list(self)
