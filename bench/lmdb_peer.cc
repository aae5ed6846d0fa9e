#include "bench/lmdb_peer.h"

#include <lmdb.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace cowkv_bench {
namespace {

std::string Err(const std::string& what, int rc) {
  return "lmdb " + what + ": " + mdb_strerror(rc) + " (" + std::to_string(rc) + ")";
}

MDB_val Val(std::string_view s) {
  MDB_val v;
  v.mv_size = s.size();
  v.mv_data = const_cast<char*>(s.data());
  return v;
}

class LmdbPeer : public KvSystem {
 public:
  explicit LmdbPeer(const LmdbPeerOptions& o) : options_(o) {}
  ~LmdbPeer() override { (void)Close(); }

  const char* name() const override { return "lmdb"; }

  std::string Create(const std::string& path) override {
    if (mkdir(path.c_str(), 0755) != 0) {
      return "lmdb mkdir " + path + ": " + std::strerror(errno);
    }
    int rc = mdb_env_create(&env_);
    if (rc != 0) {
      env_ = nullptr;
      return Err("mdb_env_create", rc);
    }
    if ((rc = mdb_env_set_mapsize(env_, options_.map_bytes)) != 0) {
      return Err("mdb_env_set_mapsize", rc);
    }
    // No flags: durable defaults (sync on commit, meta sync, no WRITEMAP).
    if ((rc = mdb_env_open(env_, path.c_str(), 0, 0644)) != 0) return Err("mdb_env_open", rc);
    MDB_txn* txn = nullptr;
    if ((rc = mdb_txn_begin(env_, nullptr, 0, &txn)) != 0) return Err("mdb_txn_begin", rc);
    if ((rc = mdb_dbi_open(txn, nullptr, 0, &dbi_)) != 0) {
      mdb_txn_abort(txn);
      return Err("mdb_dbi_open", rc);
    }
    if ((rc = mdb_txn_commit(txn)) != 0) return Err("mdb_txn_commit", rc);
    return "";
  }

  std::string Close() override {
    if (env_ != nullptr) {
      mdb_env_close(env_);
      env_ = nullptr;
    }
    return "";
  }

  std::string FillBatch(const Dataset& d, const std::vector<uint32_t>& order) override {
    MDB_txn* txn = nullptr;
    int rc = mdb_txn_begin(env_, nullptr, 0, &txn);
    if (rc != 0) return Err("mdb_txn_begin", rc);
    for (uint32_t i : order) {
      MDB_val k = Val(d.key(i)), v = Val(d.value(i));
      if ((rc = mdb_put(txn, dbi_, &k, &v, 0)) != 0) {
        mdb_txn_abort(txn);
        return Err("mdb_put(key " + std::to_string(i) + ")", rc);
      }
    }
    if ((rc = mdb_txn_commit(txn)) != 0) return Err("mdb_txn_commit", rc);
    return "";
  }

  std::string ReadBatch(const Dataset& d, const std::vector<uint32_t>& order) override {
    MDB_txn* txn = nullptr;
    int rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn);
    if (rc != 0) return Err("mdb_txn_begin(RDONLY)", rc);
    if (options_.txn_per_read) mdb_txn_reset(txn);
    std::string out;  // copy the value out, as cowkv's Get returns a copy
    std::string err;
    for (uint32_t i : order) {
      if (options_.txn_per_read && (rc = mdb_txn_renew(txn)) != 0) {
        err = Err("mdb_txn_renew", rc);
        break;
      }
      MDB_val k = Val(d.key(i)), v;
      if ((rc = mdb_get(txn, dbi_, &k, &v)) != 0) {
        err = Err("mdb_get(key " + std::to_string(i) + ")", rc);
        break;
      }
      out.assign(static_cast<const char*>(v.mv_data), v.mv_size);
      if (options_.txn_per_read) mdb_txn_reset(txn);
      if (!d.ValueOk(i, out)) {
        err = "lmdb mdb_get(key " + std::to_string(i) + "): wrong value";
        break;
      }
    }
    mdb_txn_abort(txn);
    return err;
  }

  std::string Scan(uint64_t* items, uint64_t* bytes) override {
    MDB_txn* txn = nullptr;
    int rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn);
    if (rc != 0) return Err("mdb_txn_begin(RDONLY)", rc);
    MDB_cursor* cur = nullptr;
    if ((rc = mdb_cursor_open(txn, dbi_, &cur)) != 0) {
      mdb_txn_abort(txn);
      return Err("mdb_cursor_open", rc);
    }
    uint64_t n = 0, b = 0;
    MDB_val k, v;
    MDB_cursor_op op = MDB_FIRST;
    while ((rc = mdb_cursor_get(cur, &k, &v, op)) == 0) {
      ++n;
      b += k.mv_size + v.mv_size;
      op = MDB_NEXT;
    }
    mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    if (rc != MDB_NOTFOUND) return Err("mdb_cursor_get", rc);
    *items = n;
    *bytes = b;
    return "";
  }

  std::string PutCommit(std::string_view key, std::string_view value) override {
    MDB_txn* txn = nullptr;
    int rc = mdb_txn_begin(env_, nullptr, 0, &txn);
    if (rc != 0) return Err("mdb_txn_begin", rc);
    MDB_val k = Val(key), v = Val(value);
    if ((rc = mdb_put(txn, dbi_, &k, &v, 0)) != 0) {
      mdb_txn_abort(txn);
      return Err("mdb_put", rc);
    }
    if ((rc = mdb_txn_commit(txn)) != 0) return Err("mdb_txn_commit", rc);
    return "";
  }

  uint64_t UsedBytes() override {
    MDB_envinfo info;
    MDB_stat st;
    if (mdb_env_info(env_, &info) != 0 || mdb_env_stat(env_, &st) != 0) return 0;
    return (static_cast<uint64_t>(info.me_last_pgno) + 1) * st.ms_psize;
  }

 private:
  const LmdbPeerOptions options_;
  MDB_env* env_ = nullptr;
  MDB_dbi dbi_ = 0;
};

}  // namespace

std::unique_ptr<KvSystem> NewLmdbPeer(const LmdbPeerOptions& options) {
  return std::make_unique<LmdbPeer>(options);
}

}  // namespace cowkv_bench
