#include "engine/format/node_codec.h"

#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "engine/base/check.h"
#include "engine/base/coding.h"
#include "engine/base/crc32c.h"
#include "engine/base/status.h"
#include "engine/format/layout.h"

namespace cowkv {
namespace format {

std::string EncodeChildPtr(const ChildPtr& c) {
  std::string v(kChildPtrSize, '\0');
  EncodeLE64(v.data(), c.bytenr);
  EncodeLE64(v.data() + 8, c.generation);
  return v;
}

ChildPtr DecodeChildPtr(absl::string_view value) {
  COWKV_DCHECK(value.size() == kChildPtrSize);
  return ChildPtr{DecodeLE64(value.data()), DecodeLE64(value.data() + 8)};
}

NodeEncoder::NodeEncoder(char* out, uint32_t nodesize)
    : out_(out), nodesize_(nodesize), slot_(kNodeHeaderSize), data_end_(nodesize) {}

void NodeEncoder::Add(absl::string_view key, absl::string_view value) {
  size_t len = key.size() + value.size();
  COWKV_CHECK(data_end_ >= slot_ + kSlotSize + len);
  COWKV_CHECK(key.size() <= kMaxTreeKeySize);
  size_t off = data_end_ - len;
  EncodeLE16(out_ + slot_, static_cast<uint16_t>(off));
  EncodeLE16(out_ + slot_ + 2, static_cast<uint16_t>(key.size()));
  EncodeLE16(out_ + slot_ + 4, static_cast<uint16_t>(value.size()));
  EncodeLE16(out_ + slot_ + 6, 0);
  std::memcpy(out_ + off, key.data(), key.size());
  std::memcpy(out_ + off + key.size(), value.data(), value.size());
  slot_ += kSlotSize;
  data_end_ = off;
  ++nritems_;
}

void NodeEncoder::Finish(const NodeHeader& header, absl::string_view fsid) {
  COWKV_CHECK(fsid.size() == kFsidSize);
  COWKV_CHECK(header.level < kMaxLevel);
  // Every pointer to a node is refused below kReservedHead (child pointers,
  // root items, the superblock, log trees): such a node could never be read.
  COWKV_CHECK(header.bytenr >= kReservedHead);
#ifndef COWKV_NDEBUG
  if (check_items_) DCheckItems(header);
#endif
  std::memset(out_, 0, kNodeHeaderSize);
  std::memcpy(out_ + kNodeFsidOff, fsid.data(), kFsidSize);
  EncodeLE64(out_ + kNodeBytenrOff, header.bytenr);
  EncodeLE64(out_ + kNodeGenerationOff, header.generation);
  EncodeLE64(out_ + kNodeOwnerOff, header.owner);
  EncodeLE32(out_ + kNodeNritemsOff, nritems_);
  out_[kNodeLevelOff] = static_cast<char>(header.level);
  // Free space is zeroed so images compress and dumps are deterministic.
  std::memset(out_ + slot_, 0, data_end_ - slot_);
  EncodeLE32(out_ + kNodeCsumOff, Crc32c(out_ + 4, nodesize_ - 4));
}

// The item checks of DecodeNodeViews, on the slots Add() wrote.
void NodeEncoder::DCheckItems(const NodeHeader& header) const {
  const bool leaf = header.level == 0;
  absl::string_view prev;
  for (uint32_t i = 0; i < nritems_; ++i) {
    const char* s = out_ + kNodeHeaderSize + i * kSlotSize;
    const size_t off = DecodeLE16(s), klen = DecodeLE16(s + 2), vlen = DecodeLE16(s + 4);
    const absl::string_view key(out_ + off, klen);
    COWKV_DCHECK(i == 0 || prev < key);  // strictly ascending
    COWKV_DCHECK(klen > 0 || (!leaf && i == 0));
    if (leaf) {
      COWKV_DCHECK(ItemSize(klen, vlen) <= MaxLeafItemSize(nodesize_));
    } else {
      COWKV_DCHECK(vlen == kChildPtrSize);
      const ChildPtr c = DecodeChildPtr(absl::string_view(out_ + off + klen, vlen));
      COWKV_DCHECK(c.bytenr >= kReservedHead);
      COWKV_DCHECK(c.generation <= header.generation);
    }
    prev = key;
  }
}

void EncodeNode(const NodeHeader& header, const std::vector<Item>& items,
                absl::string_view fsid, uint32_t nodesize, char* out) {
  NodeEncoder enc(out, nodesize);
  for (const Item& it : items) enc.Add(it.key, it.value);
  enc.Finish(header, fsid);
}

namespace {

std::string Hex(absl::string_view s) {
  if (s.size() > 32) return absl::StrCat(absl::BytesToHexString(s.substr(0, 32)), "..");
  return absl::BytesToHexString(s);
}

absl::Status CheckHeader(absl::string_view data, absl::string_view fsid,
                         uint32_t nodesize, const NodeExpect& expect,
                         CorruptionSite& site, NodeHeader* header) {
  const char* p = data.data();
  uint32_t want_csum = Crc32c(p + 4, nodesize - 4);
  uint32_t have_csum = DecodeLE32(p + kNodeCsumOff);
  if (have_csum != want_csum) {
    return COWKV_CORRUPTION(site, "checksum mismatch", absl::StrCat(have_csum),
                            absl::StrCat(want_csum));
  }
  if (absl::string_view(p + kNodeFsidOff, kFsidSize) != fsid) {
    return COWKV_CORRUPTION(site, "fsid mismatch", Hex(absl::string_view(p + kNodeFsidOff, kFsidSize)),
                            Hex(fsid));
  }
  header->bytenr = DecodeLE64(p + kNodeBytenrOff);
  header->generation = DecodeLE64(p + kNodeGenerationOff);
  header->owner = DecodeLE64(p + kNodeOwnerOff);
  header->level = static_cast<uint8_t>(p[kNodeLevelOff]);
  site.owner = header->owner;
  site.level = header->level;
  if (header->bytenr != expect.bytenr) {
    return COWKV_CORRUPTION(site, "bytenr mismatch (misdirected write)",
                            absl::StrCat(header->bytenr), absl::StrCat(expect.bytenr));
  }
  if (expect.generation != 0 && header->generation != expect.generation) {
    return COWKV_CORRUPTION(site, "generation mismatch (lost or stale write)",
                            absl::StrCat(header->generation),
                            absl::StrCat(expect.generation));
  }
  if (expect.owner != 0 && header->owner != expect.owner) {
    return COWKV_CORRUPTION(site, "owner mismatch", absl::StrCat(header->owner),
                            absl::StrCat(expect.owner));
  }
  if (header->level >= kMaxLevel ||
      (expect.level >= 0 && header->level != expect.level)) {
    return COWKV_CORRUPTION(site, "level mismatch", absl::StrCat(header->level),
                            absl::StrCat(expect.level));
  }
  if (DecodeLE32(p + kNodeFlagsOff) != 0) {
    return COWKV_CORRUPTION(site, "unknown header flags",
                            absl::StrCat(DecodeLE32(p + kNodeFlagsOff)), "0");
  }
  for (size_t i = kNodeLevelOff + 1; i < kNodeHeaderSize; ++i) {
    if (p[i] != 0) {
      return COWKV_CORRUPTION(site, "nonzero reserved header byte",
                              absl::StrCat("byte ", i, " = ", static_cast<uint8_t>(p[i])), "0");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status DecodeNode(absl::string_view data, absl::string_view fsid,
                        uint32_t nodesize, uint32_t sectorsize,
                        const NodeExpect& expect, NodeHeader* header,
                        std::vector<Item>* items) {
  std::vector<ItemView> views;
  COWKV_RETURN_IF_ERROR(DecodeNodeViews(data, fsid, nodesize, sectorsize, expect, header, &views));
  items->clear();
  items->reserve(views.size());
  for (const ItemView& v : views) items->push_back(Item{std::string(v.key), std::string(v.value)});
  return absl::OkStatus();
}

absl::Status DecodeNodeViews(absl::string_view data, absl::string_view fsid,
                             uint32_t nodesize, uint32_t sectorsize,
                             const NodeExpect& expect, NodeHeader* header,
                             std::vector<ItemView>* items) {
  CorruptionSite site;
  site.bytenr = expect.bytenr;
  if (data.size() != nodesize) {
    return COWKV_CORRUPTION(site, "short node", absl::StrCat(data.size()),
                            absl::StrCat(nodesize));
  }
  COWKV_RETURN_IF_ERROR(CheckHeader(data, fsid, nodesize, expect, site, header));
  const char* p = data.data();
  const uint32_t nritems = DecodeLE32(p + kNodeNritemsOff);
  const size_t slots_end = kNodeHeaderSize + static_cast<size_t>(nritems) * kSlotSize;
  if (nritems > NodeCapacity(nodesize) / kSlotSize || slots_end > nodesize) {
    return COWKV_CORRUPTION(site, "nritems out of range", absl::StrCat(nritems), "");
  }
  const bool leaf = header->level == 0;
  items->clear();
  items->reserve(nritems);
  size_t data_end = nodesize;
  for (uint32_t i = 0; i < nritems; ++i) {
    site.slot = static_cast<int>(i);
    const char* s = p + kNodeHeaderSize + i * kSlotSize;
    size_t off = DecodeLE16(s), klen = DecodeLE16(s + 2), vlen = DecodeLE16(s + 4);
    if (DecodeLE16(s + 6) != 0) return COWKV_CORRUPTION(site, "slot padding not zero", "", "");
    if (off + klen + vlen != data_end || off < slots_end) {
      return COWKV_CORRUPTION(site, "item data out of place",
                              absl::StrCat(off, "+", klen + vlen),
                              absl::StrCat("end ", data_end, " above ", slots_end));
    }
    data_end = off;
    // Internal nodes use an empty key in slot 0 for "-infinity".
    bool key_ok = klen <= kMaxTreeKeySize && (klen > 0 || (!leaf && i == 0));
    if (!key_ok) return COWKV_CORRUPTION(site, "bad key length", absl::StrCat(klen), "");
    if (leaf ? ItemSize(klen, vlen) > MaxLeafItemSize(nodesize) : vlen != kChildPtrSize) {
      return COWKV_CORRUPTION(site, "bad value length", absl::StrCat(vlen), "");
    }
    absl::string_view key(p + off, klen);
    if (i > 0 && !(items->back().key < key)) {
      return COWKV_CORRUPTION(site, "keys out of order", Hex(key),
                              absl::StrCat("> ", Hex(items->back().key)));
    }
    items->push_back(ItemView{key, absl::string_view(p + off + klen, vlen)});
    if (!leaf) {
      ChildPtr c = DecodeChildPtr(items->back().value);
      if (c.bytenr % sectorsize != 0 || c.bytenr < kReservedHead ||
          c.generation > header->generation) {
        return COWKV_CORRUPTION(site, "bad child pointer",
                                absl::StrCat(c.bytenr, "@", c.generation), "");
      }
    }
  }
  for (size_t i = slots_end; i < data_end; ++i) {
    if (p[i] != 0) {
      site.slot = -1;
      return COWKV_CORRUPTION(site, "free space not zero", absl::StrCat("offset ", i), "");
    }
  }
  return absl::OkStatus();
}

}  // namespace format
}  // namespace cowkv
