// The job queue of seed 000 §4 as one Sluice component: the role comes from the actor's
// init config ({"role": "leader" | "worker" | "config_server" | "collector" | "device"}).
// See ../PROTOCOL.md for every message and the invariants the driver checks.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	sluice "sluice.dev/guest"
	"sluice.dev/guest/host"
)

const (
	dispatcherID     = "job-queue-leader"
	dispatchCtx      = `{"tenant":"default","namespace":"default"}`
	heartbeatIdemKey = "hb-leader-worker-101" // same key for every heartbeat: last write wins
)

// Config is the actor's init table from app-config.toml.
type Config struct {
	Role   string `json:"role"`
	WorkMs uint64 `json:"work_ms"`
	Online *bool  `json:"online"`
}

// Role is one part of the protocol: it handles the messages of its actor type, with the
// turn's context (pass it to every host call).
type Role interface {
	Handle(ctx context.Context, env *sluice.Envelope) ([]byte, error)
}

// jobQueue is the registered actor: it picks its role in Init and delegates to it.
type jobQueue struct{ role Role }

func (j *jobQueue) Init(config string) error {
	var cfg Config
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		return sluice.InvalidArgument("INVALID_ARGUMENT: init config is not JSON: " + err.Error())
	}
	switch cfg.Role {
	case "leader":
		j.role = NewJobQueueLeader()
	case "worker":
		j.role = NewWorker()
	case "config_server":
		j.role = &ConfigServer{workMs: cfg.WorkMs, seen: map[string]bool{}}
	case "collector":
		j.role = &TelemetryCollector{workMs: cfg.WorkMs, seen: map[int]bool{}}
	case "device":
		online := cfg.Online == nil || *cfg.Online
		j.role = &Device{online: online, seen: map[int]bool{}}
	default:
		return sluice.InvalidArgument(fmt.Sprintf("INVALID_ARGUMENT: unknown role %q", cfg.Role))
	}
	return nil
}

func (j *jobQueue) Handle(ctx context.Context, env *sluice.Envelope) ([]byte, error) {
	return j.role.Handle(ctx, env)
}

// ask is host.Ask bounded by ms (the turn's own deadline still applies if it comes first).
func ask(ctx context.Context, ms int, to, msgType string, payload any) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
	defer cancel()
	return host.Ask(ctx, to, msgType, payload)
}

// decode unmarshals a JSON payload into v; an empty payload leaves v as it is.
func decode(env *sluice.Envelope, v any) error {
	if len(env.Payload) == 0 {
		return nil
	}
	if err := env.JSON(v); err != nil {
		return sluice.InvalidArgument(fmt.Sprintf("INVALID_ARGUMENT: %s payload is not JSON: %v", env.MsgType, err))
	}
	return nil
}

// unknown is the error for a msg-type the role does not handle.
func unknown(role string, env *sluice.Envelope) error {
	return sluice.InvalidArgument(
		fmt.Sprintf("INVALID_ARGUMENT: %s does not handle msg-type %q", role, env.MsgType))
}

// busy burns at least ms milliseconds of the turn: the work is a busy-wait on the host
// clock. now_ms has millisecond resolution, so waiting until it has advanced by more than ms
// is what guarantees ms whole milliseconds.
func busy(ms uint64) {
	if ms == 0 {
		return
	}
	start := host.NowMs()
	for host.NowMs()-start <= ms {
	}
}

// heartbeat is the heartbeat payload; a message is one when Type == "heartbeat".
type heartbeat struct {
	Type string  `json:"type"`
	Seq  int     `json:"seq"`
	CPU  float64 `json:"cpu"`
}

// heartbeatLog records heartbeat seqs once each, in arrival order.
type heartbeatLog struct {
	seqs []int
	seen map[int]bool
}

func (h *heartbeatLog) record(seq int) {
	if h.seen == nil {
		h.seen = map[int]bool{}
	}
	if !h.seen[seq] {
		h.seen[seq] = true
		h.seqs = append(h.seqs, seq)
	}
}

// list is the recorded seqs, never nil (so it marshals as []).
func (h *heartbeatLog) list() []int { return nonNil(h.seqs) }

func init() { sluice.Register(&jobQueue{}) }

func main() {}
