// cowkv.v1.KV, one-shot calls: Get, Range, Put, Delete, DeleteRange, Txn.
// Every write goes through the engine's Txn, which returns the revision the
// response carries.
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cowkv/errors.h"
#include "cowkv/status_macros.h"
#include "server/convert.h"
#include "server/limits.h"
#include "server/range_page.h"
#include "server/services.h"
#include "server/validate.h"

namespace cowkv {
namespace server {
namespace {

absl::Status ValidateDurability(v1::Durability d) {
  if (!v1::Durability_IsValid(d)) {
    return absl::InvalidArgumentError(absl::StrCat("durability: unknown value ", d));
  }
  return absl::OkStatus();
}

absl::Status ValidateCompare(const v1::Compare& c) {
  COWKV_RETURN_IF_ERROR(ValidateKey("compare.key", c.key()));
  if (!v1::Compare::Target_IsValid(c.target()) || !v1::Compare::Op_IsValid(c.op())) {
    return absl::InvalidArgumentError("compare: unknown target or op");
  }
  if (c.target() == v1::Compare::TARGET_EXISTS && c.op() != v1::Compare::OP_EQUAL &&
      c.op() != v1::Compare::OP_NOT_EQUAL) {
    return absl::InvalidArgumentError("compare: TARGET_EXISTS takes OP_EQUAL or OP_NOT_EQUAL");
  }
  return absl::OkStatus();
}

// One RequestOp as an engine TxnOp, checked.
absl::StatusOr<TxnOp> ToEngineOp(const v1::RequestOp& op) {
  TxnOp out;
  switch (op.op_case()) {
    case v1::RequestOp::kPut:
      COWKV_RETURN_IF_ERROR(ValidateKey("put.key", op.put().key()));
      COWKV_RETURN_IF_ERROR(ValidateValue(op.put().value()));
      out.type = TxnOp::Type::kPut;
      out.key = op.put().key();
      out.value = op.put().value();
      out.lease = op.put().lease();
      return out;
    case v1::RequestOp::kDelete:
      COWKV_RETURN_IF_ERROR(ValidateKey("delete.key", op.delete_().key()));
      out.type = TxnOp::Type::kDelete;
      out.key = op.delete_().key();
      return out;
    case v1::RequestOp::kDeleteRange:
      COWKV_RETURN_IF_ERROR(ValidateBound("delete_range.start", op.delete_range().start()));
      COWKV_RETURN_IF_ERROR(ValidateBound("delete_range.end", op.delete_range().end()));
      out.type = TxnOp::Type::kDeleteRange;
      out.key = op.delete_range().start();
      out.end = op.delete_range().end();
      return out;
    case v1::RequestOp::kRange: {
      out.type = TxnOp::Type::kRange;
      COWKV_ASSIGN_OR_RETURN(out.range, PlanPage(FieldsOf(op.range()), "txn", ""));
      out.range.max_value_load = 0;  // a Txn reads whole values: its budget bounds them
      return out;
    }
    default:
      return absl::InvalidArgumentError("a RequestOp must set one of put, delete, delete_range, range");
  }
}

absl::StatusOr<std::vector<TxnOp>> ToEngineOps(absl::string_view branch,
                                               const google::protobuf::RepeatedPtrField<v1::RequestOp>& ops,
                                               size_t max_ops) {
  if (static_cast<size_t>(ops.size()) > max_ops) {
    return absl::InvalidArgumentError(absl::StrCat(
        branch, ": at most ", max_ops, " ops, not ", ops.size(), " (cowkvd --max-txn-ops)"));
  }
  std::vector<TxnOp> out;
  out.reserve(ops.size());
  for (const v1::RequestOp& op : ops) {
    COWKV_ASSIGN_OR_RETURN(TxnOp e, ToEngineOp(op));
    out.push_back(std::move(e));
  }
  return out;
}

absl::StatusOr<TxnRequest> ToEngineTxn(const v1::TxnRequest& req, const RequestLimits& limits) {
  TxnRequest txn;
  if (static_cast<size_t>(req.compare_size()) > limits.max_txn_ops) {
    return absl::InvalidArgumentError(absl::StrCat("compare: at most ", limits.max_txn_ops,
                                                   " compares (cowkvd --max-txn-ops)"));
  }
  for (const v1::Compare& c : req.compare()) {
    COWKV_RETURN_IF_ERROR(ValidateCompare(c));
    txn.compare.push_back(ToEngine(c));
  }
  COWKV_ASSIGN_OR_RETURN(txn.success, ToEngineOps("success", req.success(), limits.max_txn_ops));
  COWKV_ASSIGN_OR_RETURN(txn.failure, ToEngineOps("failure", req.failure(), limits.max_txn_ops));
  txn.max_response_bytes = limits.txn_response_bytes;
  COWKV_RETURN_IF_ERROR(ValidateDurability(req.durability()));
  txn.durability = ToEngine(req.durability());
  return txn;
}

void ToProtoResults(const TxnResponse& r, const std::vector<TxnOp>& ops, v1::TxnResponse* out) {
  out->set_succeeded(r.succeeded);
  out->set_revision(r.revision);
  for (size_t i = 0; i < r.results.size() && i < ops.size(); ++i) {
    v1::ResponseOp* res = out->add_responses();
    switch (ops[i].type) {
      case TxnOp::Type::kPut: res->mutable_put(); break;
      case TxnOp::Type::kDelete:
      case TxnOp::Type::kDeleteRange: res->mutable_delete_()->set_deleted(r.results[i].deleted); break;
      case TxnOp::Type::kRange: {
        RangeFields f;
        f.reverse = ops[i].range.reverse;
        // No paging inside a Txn: FinishPage only trims; the token is dropped.
        FinishPage(r.results[i].range, f, "txn", res->mutable_range());
        res->mutable_range()->clear_next_page_token();
        break;
      }
    }
  }
}

// A durable write's answer: `Response` with its revision, or the error.
template <typename Response>
void AnswerRevision(const absl::StatusOr<uint64_t>& revision, grpc::ByteBuffer* response,
                    const ServiceEnv::Answer& answer) {
  if (revision.ok()) {
    Response resp;
    resp.set_revision(*revision);
    if (!SerializeRawResponse(resp, response)) {
      answer(
          absl::InternalError(absl::StrCat(Response::descriptor()->name(), " did not serialize")));
      return;
    }
  }
  answer(revision.status());
}

absl::Status KeyNotFound(absl::string_view key) {
  return absl::NotFoundError(absl::StrCat("key not found: \"", KeyForMessage(key), "\""));
}

}  // namespace

absl::StatusOr<TxnResponse> KvService::RunTxn(absl::string_view subvolume, const TxnRequest& txn) {
  COWKV_ASSIGN_OR_RETURN(std::unique_ptr<Subvolume> sv, env_->OpenSubvolume("subvolume", subvolume));
  const absl::Time start = absl::Now();
  absl::StatusOr<TxnResponse> r = sv->Txn(txn);
  if (r.ok()) ObserveWrite(txn.durability, start);
  return r;
}

void KvService::ObserveWrite(Durability d, absl::Time start) {
  if (env_->IsDurable(d)) env_->metrics().durable_write().Observe(absl::Now() - start);
}

grpc::Status KvService::Get(ServerContext* ctx, const v1::GetRequest* req, v1::GetResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.KV/Get", ServiceEnv::Errors::kPlain, [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidateKey("key", req->key()));
    COWKV_ASSIGN_OR_RETURN(std::unique_ptr<Subvolume> sv,
                           env_->OpenSubvolume("subvolume", req->subvolume()));
    uint64_t revision = 0;
    // At a past revision (req->revision() != 0): from the history.
    auto get = [&](uint64_t max_value_load) {
      if (req->revision() == 0) return sv->GetItem(req->key(), max_value_load, &revision);
      revision = req->revision();
      return sv->GetItemAt(req->key(), req->revision(), max_value_load);
    };
    // A large value is read only once its bytes are admitted.
    absl::StatusOr<KeyValue> read = get(kAdmitFreeValueBytes);
    ResponseGrant grant;
    if (read.ok() && read->value.size() < read->value_size) {
      COWKV_ASSIGN_OR_RETURN(grant,
                             env_->budget().Acquire(kUnaryResponseCopies * read->value_size, ctx));
      read = get(0);
    }
    if (absl::IsNotFound(read.status())) {
      return KeyNotFound(req->key());
    }
    if (absl::IsDataLoss(read.status())) {
      // The engine named the extent (and counted it); add the key, keeping
      // the engine's reason.
      return WithContext(read.status(), absl::StrCat("key \"", KeyForMessage(req->key()), "\""));
    }
    COWKV_RETURN_IF_ERROR(read.status());
    ToProto(*read, resp->mutable_kv());
    resp->set_revision(revision);
    return absl::OkStatus();
  });
}

grpc::Status KvService::Range(ServerContext* ctx, const v1::RangeRequest* req,
                              v1::RangeResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.KV/Range", ServiceEnv::Errors::kPlain, [&]() -> absl::Status {
    // Every field the request alone decides (bounds, names, the page token,
    // whose scope is the names) is checked before any lookup, so a
    // malformed request is INVALID_ARGUMENT whatever the store holds.
    const bool at_snapshot = !req->snapshot().empty();
    // A page token is valid only for the same revision (`@rev`).
    const std::string scope =
        absl::StrCat(at_snapshot ? absl::StrCat("snap:", req->snapshot())
                                 : absl::StrCat("sv:", req->subvolume()),
                     req->revision() != 0 ? absl::StrCat("@", req->revision()) : "");
    const RangeFields fields = FieldsOf(*req);
    COWKV_ASSIGN_OR_RETURN(RangeRequest page, PlanPage(fields, scope, req->page_token()));
    page.revision = req->revision();
    if (!req->subvolume().empty()) {
      COWKV_RETURN_IF_ERROR(ValidateSubvolumeName("subvolume", req->subvolume()));
    }
    if (at_snapshot) {
      COWKV_RETURN_IF_ERROR(ValidateSubvolumeName("snapshot", req->snapshot()));
      COWKV_RETURN_IF_ERROR(ServiceEnv::RequireSubvolume(req->snapshot()));
      COWKV_RETURN_IF_ERROR(ServiceEnv::RequireSubvolume(req->subvolume()));
      COWKV_ASSIGN_OR_RETURN(SubvolumeInfo snap, env_->store().ShowSubvolume(req->snapshot()));
      if (!snap.read_only) {
        return absl::FailedPreconditionError(absl::StrCat(
            "snapshot: '", req->snapshot(), "' is writable, so reads of it would not be one "
            "consistent view; read at a snapshot created with read_only"));
      }
      if (!req->subvolume().empty()) {
        COWKV_ASSIGN_OR_RETURN(SubvolumeInfo src, env_->store().ShowSubvolume(req->subvolume()));
        if (snap.parent_id != src.id) {
          return absl::InvalidArgumentError(absl::StrCat(
              "snapshot: '", req->snapshot(), "' is not a snapshot of '", req->subvolume(), "'"));
        }
      }
    }
    const std::string& name = at_snapshot ? req->snapshot() : req->subvolume();
    COWKV_ASSIGN_OR_RETURN(std::unique_ptr<Subvolume> sv, env_->OpenSubvolume("subvolume", name));
    COWKV_RETURN_IF_ERROR(ServiceEnv::CheckAlive(ctx));
    ResponseGrant grant;
    if (!page.count_only) {
      COWKV_ASSIGN_OR_RETURN(grant,
                             env_->budget().Acquire(kUnaryResponseCopies * PageBytes(page), ctx));
    }
    COWKV_ASSIGN_OR_RETURN(RangeResult r, sv->Range(page));
    if (!page.keys_only && !r.kvs.empty() && r.kvs[0].value.size() < r.kvs[0].value_size) {
      // A first pair larger than a page: admitted on its own, then read.
      grant.Release();
      COWKV_ASSIGN_OR_RETURN(
          grant, env_->budget().Acquire(
                     kUnaryResponseCopies * (r.kvs[0].value_size + PageBytes(page)), ctx));
      page.max_value_load = 0;
      COWKV_ASSIGN_OR_RETURN(r, sv->Range(page));
    }
    COWKV_RETURN_IF_ERROR(ServiceEnv::CheckAlive(ctx));  // don't build a reply nobody reads
    FinishPage(std::move(r), fields, scope, resp);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* KvService::Put(grpc::CallbackServerContext* ctx,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) {
  return env_->RunAsync(
      ctx, "cowkv.v1.KV/Put", ServiceEnv::Errors::kPlain,
      [&](ServiceEnv::Answer answer, MemoryBudget::Grant* keep) -> absl::Status {
        v1::PutRequest req;
        COWKV_RETURN_IF_ERROR(ParseRawRequest(request, "cowkv.v1.KV/Put", &req));
        COWKV_RETURN_IF_ERROR(ValidateKey("key", req.key()));
        COWKV_RETURN_IF_ERROR(ValidateValue(req.value()));
        COWKV_RETURN_IF_ERROR(ValidateDurability(req.durability()));
        // The request stays in memory until the write is durable: a large
        // value holds its bytes of the server's budget until then.
        if (req.value().size() > kAdmitFreeValueBytes) {
          COWKV_ASSIGN_OR_RETURN(*keep, env_->budget().TryAcquire(req.value().size()));
        }
        const Durability d = ToEngine(req.durability());
        COWKV_ASSIGN_OR_RETURN(std::unique_ptr<Subvolume> sv,
                               env_->OpenSubvolume("subvolume", req.subvolume()));
        const absl::Time start = absl::Now();
        // Applied before PutItemThen returns: `req` may go then.
        auto done = [this, d, start, response, answer](absl::StatusOr<uint64_t> revision) {
          if (revision.ok()) ObserveWrite(d, start);
          AnswerRevision<v1::PutResponse>(revision, response, answer);
        };
        if (req.lease() != 0) {  // leases (lease_service.h)
          sv->PutItemWithLeaseThen(req.key(), req.value(), req.lease(), d, std::move(done));
        } else {
          sv->PutItemThen(req.key(), req.value(), d, std::move(done));
        }
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* KvService::Delete(grpc::CallbackServerContext* ctx,
                                            const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) {
  return env_->RunAsync(
      ctx, "cowkv.v1.KV/Delete", ServiceEnv::Errors::kPlain,
      [&](ServiceEnv::Answer answer, MemoryBudget::Grant*) -> absl::Status {
        v1::DeleteRequest req;
        COWKV_RETURN_IF_ERROR(ParseRawRequest(request, "cowkv.v1.KV/Delete", &req));
        COWKV_RETURN_IF_ERROR(ValidateKey("key", req.key()));
        COWKV_RETURN_IF_ERROR(ValidateDurability(req.durability()));
        const Durability d = ToEngine(req.durability());
        COWKV_ASSIGN_OR_RETURN(std::unique_ptr<Subvolume> sv,
                               env_->OpenSubvolume("subvolume", req.subvolume()));
        const absl::Time start = absl::Now();
        sv->DeleteItemThen(
            req.key(), d,
            [this, d, start, key = req.key(), response, answer](absl::StatusOr<uint64_t> revision) {
              if (absl::IsNotFound(revision.status())) {
                answer(KeyNotFound(key));
                return;
              }
              if (revision.ok()) ObserveWrite(d, start);
              AnswerRevision<v1::DeleteResponse>(revision, response, answer);
            });
        return absl::OkStatus();
      });
}

grpc::Status KvService::DeleteRange(ServerContext* ctx, const v1::DeleteRangeRequest* req,
                                    v1::DeleteRangeResponse* resp) {
  return env_->Run(ctx, "cowkv.v1.KV/DeleteRange", ServiceEnv::Errors::kPlain,
                   [&]() -> absl::Status {
    COWKV_RETURN_IF_ERROR(ValidateDurability(req->durability()));
    if (req->start().empty() && req->end().empty() && req->prefix().empty()) {
      return absl::InvalidArgumentError(
          "DeleteRange needs start, end or prefix (to delete every key, pass start \"\\x00\")");
    }
    RangeFields fields;
    fields.start = req->start();
    fields.end = req->end();
    fields.prefix = req->prefix();
    COWKV_ASSIGN_OR_RETURN(RangeRequest bounds, PlanPage(fields, "", ""));
    TxnRequest txn;
    TxnOp& op = txn.success.emplace_back();
    op.type = TxnOp::Type::kDeleteRange;
    op.key = bounds.start;
    op.end = bounds.end;
    txn.durability = ToEngine(req->durability());
    COWKV_ASSIGN_OR_RETURN(TxnResponse r, RunTxn(req->subvolume(), txn));
    resp->set_deleted(r.results.empty() ? 0 : r.results[0].deleted);
    resp->set_revision(r.revision);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* KvService::Txn(grpc::CallbackServerContext* ctx,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) {
  return env_->RunAsync(
      ctx, "cowkv.v1.KV/Txn", ServiceEnv::Errors::kPlain,
      [&](ServiceEnv::Answer answer, MemoryBudget::Grant* keep) -> absl::Status {
        v1::TxnRequest req;
        COWKV_RETURN_IF_ERROR(ParseRawRequest(request, "cowkv.v1.KV/Txn", &req));
        COWKV_ASSIGN_OR_RETURN(TxnRequest parsed, ToEngineTxn(req, env_->limits()));
        auto txn = std::make_shared<const TxnRequest>(std::move(parsed));
        // A Txn that may write needs a write token; one that only reads, read.
        for (const std::vector<TxnOp>* branch : {&txn->success, &txn->failure}) {
          for (const TxnOp& op : *branch) {
            if (op.type != TxnOp::Type::kRange) {
              COWKV_RETURN_IF_ERROR(ServiceEnv::RequireAccess(Access::kWrite));
            }
          }
        }
        // Its range results, at most a page each, within its response
        // budget, held until the response is sent.
        uint64_t ranges = 0;
        for (const std::vector<TxnOp>* branch : {&txn->success, &txn->failure}) {
          uint64_t n = 0;
          for (const TxnOp& op : *branch) {
            n += op.type == TxnOp::Type::kRange && !op.range.count_only;
          }
          ranges = std::max(ranges, n);
        }
        // With the request itself, held until the Txn is durable.
        uint64_t held = 0;
        for (const std::vector<TxnOp>* branch : {&txn->success, &txn->failure}) {
          for (const TxnOp& op : *branch) held += op.key.size() + op.value.size();
        }
        if (held <= kAdmitFreeValueBytes) held = 0;
        if (ranges > 0) {
          held +=
              kUnaryResponseCopies *
              std::min<uint64_t>(txn->max_response_bytes, ranges * (kRangePageBytes + (1u << 20)));
        }
        if (held > 0) {
          COWKV_ASSIGN_OR_RETURN(*keep, env_->budget().TryAcquire(held));
        }
        COWKV_ASSIGN_OR_RETURN(std::unique_ptr<Subvolume> sv,
                               env_->OpenSubvolume("subvolume", req.subvolume()));
        const absl::Time start = absl::Now();
        sv->TxnThen(*txn, [this, txn, start, response, answer](absl::StatusOr<TxnResponse> r) {
          if (r.ok()) {
            ObserveWrite(txn->durability, start);
            v1::TxnResponse resp;
            ToProtoResults(*r, r->succeeded ? txn->success : txn->failure, &resp);
            if (!SerializeRawResponse(resp, response)) {
              answer(absl::InternalError("TxnResponse did not serialize"));
              return;
            }
          }
          answer(r.status());
        });
        return absl::OkStatus();
      });
}

}  // namespace server
}  // namespace cowkv
