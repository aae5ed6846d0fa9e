package cowkv

// The opt-in retry of UNAVAILABLE on idempotent reads (docs/api.md
// "Retrying UNAVAILABLE"): a gRPC service config with a retryPolicy for the
// methods in RetriedMethods, given to grpc.NewClient with
// grpc.WithDefaultServiceConfig.

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// RetriedMethods are the idempotent methods WithUnavailableRetry retries
// ("service/method"; clients/conformance/unavailable_retry.json). Writes
// are never retried: an UNAVAILABLE write may have been applied.
var RetriedMethods = []string{
	"cowkv.v1.KV/Get", "cowkv.v1.KV/Range",
	"cowkv.v1.Files/Stat", "cowkv.v1.Files/ReadDir", "cowkv.v1.Files/Read",
	"cowkv.v1.Files/ReadLink", "cowkv.v1.Files/Fiemap", "cowkv.v1.Files/GetXattr",
	"cowkv.v1.Files/ListXattrs",
	"cowkv.v1.Subvolumes/List", "cowkv.v1.Subvolumes/Show",
	"cowkv.v1.Lease/TimeToLive", "cowkv.v1.Lease/Leases",
	"cowkv.v1.Admin/Stats", "cowkv.v1.Admin/Version",
}

// UnavailableRetry is gRPC's retryPolicy for UNAVAILABLE: at most
// MaxAttempts calls (2..5), the wait before retry n random in [0, b],
// b = min(MaxBackoff, InitialBackoff * BackoffMultiplier^(n-1)). A zero
// field takes its default: 5, 100 ms, 1 s, 2.
type UnavailableRetry struct {
	MaxAttempts                int
	InitialBackoff, MaxBackoff time.Duration
	BackoffMultiplier          float64
}

// WithUnavailableRetry retries the idempotent reads (RetriedMethods) that
// fail with UNAVAILABLE under this policy; off without it.
func WithUnavailableRetry(r UnavailableRetry) Option {
	return func(o *options) { o.retry = &r }
}

func (r UnavailableRetry) withDefaults() UnavailableRetry {
	if r.MaxAttempts == 0 {
		r.MaxAttempts = 5
	}
	if r.InitialBackoff == 0 {
		r.InitialBackoff = 100 * time.Millisecond
	}
	if r.MaxBackoff == 0 {
		r.MaxBackoff = time.Second
	}
	if r.BackoffMultiplier == 0 {
		r.BackoffMultiplier = 2
	}
	return r
}

// serviceConfig is the service config JSON of the policy (with defaults).
func (r UnavailableRetry) serviceConfig() (string, error) {
	r = r.withDefaults()
	if r.MaxAttempts < 2 || r.MaxAttempts > 5 {
		return "", invalid("Dial", "UnavailableRetry: MaxAttempts %d not in [2, 5]", r.MaxAttempts)
	}
	if r.InitialBackoff < 0 || r.MaxBackoff < r.InitialBackoff || r.BackoffMultiplier < 0 {
		return "", invalid("Dial", "UnavailableRetry: want 0 < InitialBackoff <= MaxBackoff and BackoffMultiplier > 0")
	}
	type name struct {
		Service string `json:"service"`
		Method  string `json:"method"`
	}
	var names []name
	for _, m := range RetriedMethods {
		s, meth, _ := strings.Cut(m, "/")
		names = append(names, name{s, meth})
	}
	secs := func(d time.Duration) string { return fmt.Sprintf("%.3fs", d.Seconds()) }
	cfg := map[string]any{"methodConfig": []any{map[string]any{
		"name": names,
		"retryPolicy": map[string]any{
			"maxAttempts": r.MaxAttempts, "initialBackoff": secs(r.InitialBackoff),
			"maxBackoff": secs(r.MaxBackoff), "backoffMultiplier": r.BackoffMultiplier,
			"retryableStatusCodes": []string{"UNAVAILABLE"},
		},
	}}}
	b, err := json.Marshal(cfg)
	return string(b), err
}
