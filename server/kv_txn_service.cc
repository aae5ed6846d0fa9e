// cowkv.v1.KV, interactive transactions: Begin, TxnGet, TxnRange, TxnPut,
// TxnDelete, Commit, Abort. The handles and their leases live in
// TxnRegistry; these handlers only check input and forward.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cowkv/status_macros.h"
#include "server/connections.h"
#include "server/convert.h"
#include "server/limits.h"
#include "server/range_page.h"
#include "server/services.h"
#include "server/validate.h"

namespace cowkv {
namespace server {

grpc::Status KvService::Begin(ServerContext* ctx, const v1::BeginRequest* req,
                              v1::BeginResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.KV/Begin", ServiceEnv::Errors::kPlain, [&]() -> absl::Status {
    if (req->lease_ms() > kMaxLeaseMs) {
      return absl::InvalidArgumentError(
          absl::StrCat("lease_ms: at most ", kMaxLeaseMs, ", not ", req->lease_ms()));
    }
    const uint64_t lease_ms = req->lease_ms() == 0 ? kDefaultLeaseMs : req->lease_ms();
    COWKV_ASSIGN_OR_RETURN(std::unique_ptr<Subvolume> sv,
                           env_->OpenSubvolume("subvolume", req->subvolume()));
    COWKV_ASSIGN_OR_RETURN(std::unique_ptr<KvTransaction> txn, sv->BeginTransaction());
    COWKV_ASSIGN_OR_RETURN(TxnRegistry::Begun begun,
                           env_->txns().Add(PeerAddress(ctx->peer()), ctx->peer(), std::move(txn),
                                            absl::Milliseconds(lease_ms), absl::Now()));
    resp->set_handle(begun.handle);
    resp->set_read_revision(begun.read_revision);
    resp->set_lease_ms(lease_ms);
    return absl::OkStatus();
  });
}

grpc::Status KvService::TxnGet(ServerContext* ctx, const v1::TxnGetRequest* req,
                               v1::GetResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.KV/TxnGet", ServiceEnv::Errors::kPlain, [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidateKey("key", req->key()));
    // As Get: a large value is read only once its bytes are admitted. The
    // first look loads at most kAdmitFreeValueBytes of the value (it is a
    // read of the key at the transaction's revision, as the Get after it).
    RangeRequest one;
    one.start = req->key();
    one.end = absl::StrCat(req->key(), std::string(1, '\0'));
    one.limit = 1;
    one.max_value_load = kAdmitFreeValueBytes;
    uint64_t value_size = 0;
    COWKV_RETURN_IF_ERROR(
        env_->txns().With(req->handle(), absl::Now(), [&](KvTransaction& txn) -> absl::Status {
          COWKV_ASSIGN_OR_RETURN(RangeResult r, txn.Range(one));
          if (!r.kvs.empty()) value_size = r.kvs[0].value_size;
          return absl::OkStatus();
        }));
    ResponseGrant grant;
    if (value_size > kAdmitFreeValueBytes) {
      COWKV_ASSIGN_OR_RETURN(grant, env_->budget().Acquire(kUnaryResponseCopies * value_size, ctx));
    }
    return env_->txns().With(req->handle(), absl::Now(), [&](KvTransaction& txn) -> absl::Status {
      COWKV_ASSIGN_OR_RETURN(KeyValue kv, txn.Get(req->key()));
      ToProto(kv, resp->mutable_kv());
      resp->set_revision(txn.read_revision());
      return absl::OkStatus();
    });
  });
}

grpc::Status KvService::TxnRange(ServerContext* ctx, const v1::TxnRangeRequest* req,
                                 v1::RangeResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.KV/TxnRange", ServiceEnv::Errors::kPlain, [&]() -> absl::Status {
    if (!req->range().subvolume().empty() || !req->range().snapshot().empty()) {
      return absl::InvalidArgumentError(
          "range.subvolume and range.snapshot must be empty: the transaction's subvolume applies");
    }
    const std::string scope = absl::StrCat("txn:", req->handle());
    const RangeFields fields = FieldsOf(req->range());
    COWKV_ASSIGN_OR_RETURN(RangeRequest page, PlanPage(fields, scope, req->range().page_token()));
    // A transaction's read is recorded as it is made: read whole values
    // (a page's first may be up to a value's limit), admitted first.
    page.max_value_load = 0;
    ResponseGrant grant;
    if (!page.count_only) {
      COWKV_ASSIGN_OR_RETURN(
          grant,
          env_->budget().Acquire(
              kUnaryResponseCopies * (PageBytes(page) + (page.keys_only ? 0 : kMaxValueSize)),
              ctx));
    }
    return env_->txns().With(req->handle(), absl::Now(), [&](KvTransaction& txn) -> absl::Status {
      COWKV_ASSIGN_OR_RETURN(RangeResult r, txn.Range(page));
      FinishPage(std::move(r), fields, scope, resp);
      return absl::OkStatus();
    });
  });
}

grpc::Status KvService::TxnPut(ServerContext* ctx, const v1::TxnPutRequest* req,
                               v1::TxnPutResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.KV/TxnPut", ServiceEnv::Errors::kPlain, [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidateKey("key", req->key()));
    COWKV_RETURN_IF_ERROR(ValidateValue(req->value()));
    return env_->txns().With(req->handle(), absl::Now(), [&](KvTransaction& txn) {
      return txn.Put(req->key(), req->value());
    });
  });
}

grpc::Status KvService::TxnDelete(ServerContext* ctx, const v1::TxnDeleteRequest* req,
                                  v1::TxnDeleteResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.KV/TxnDelete", ServiceEnv::Errors::kPlain, [&]() -> absl::Status {
    if (req->range()) {
      COWKV_RETURN_IF_ERROR(ValidateBound("key", req->key()));
      COWKV_RETURN_IF_ERROR(ValidateBound("end", req->end()));
    } else {
      COWKV_RETURN_IF_ERROR(ValidateKey("key", req->key()));
      if (!req->end().empty()) {
        return absl::InvalidArgumentError("end: only with range = true");
      }
    }
    return env_->txns().With(req->handle(), absl::Now(), [&](KvTransaction& txn) {
      return req->range() ? txn.DeleteRange(req->key(), req->end()) : txn.Delete(req->key());
    });
  });
}

grpc::Status KvService::Commit(ServerContext* ctx, const v1::CommitRequest* req,
                               v1::CommitResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.KV/Commit", ServiceEnv::Errors::kPlain, [&]() -> absl::Status {
    if (!v1::Durability_IsValid(req->durability())) {
      return absl::InvalidArgumentError(absl::StrCat("durability: unknown value ", req->durability()));
    }
    const Durability d = ToEngine(req->durability());
    const absl::Time start = absl::Now();
    COWKV_ASSIGN_OR_RETURN(uint64_t revision, env_->txns().Commit(req->handle(), d, start));
    if (env_->IsDurable(d)) env_->metrics().durable_write().Observe(absl::Now() - start);
    resp->set_revision(revision);
    return absl::OkStatus();
  });
}

grpc::Status KvService::Abort(ServerContext* ctx, const v1::AbortRequest* req,
                              v1::AbortResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.KV/Abort", ServiceEnv::Errors::kPlain, [&]() -> absl::Status {
    return env_->txns().Abort(req->handle(), absl::Now());
  });
}

}  // namespace server
}  // namespace cowkv
