package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	sluice "sluice.dev/guest"
	"sluice.dev/guest/sluicetest"
)

// fakeHost is the SDK's fake host with scripted ask and tell failures.
type fakeHost struct {
	*sluicetest.Fake
	askErr  func(to string, payload []byte) error
	tellErr func(to string, payload []byte) error
}

func (f *fakeHost) Ask(to, msgType string, payload []byte, timeoutMs uint64) ([]byte, error) {
	out, err := f.Fake.Ask(to, msgType, payload, timeoutMs)
	if err == nil && f.askErr != nil {
		err = f.askErr(to, payload)
	}
	return out, err
}

func (f *fakeHost) Tell(to, msgType string, payload []byte) (sluice.Receipt, error) {
	r, err := f.Fake.Tell(to, msgType, payload)
	if err == nil && f.tellErr != nil {
		err = f.tellErr(to, payload)
	}
	return r, err
}

func newFake(t *testing.T) *fakeHost {
	t.Helper()
	f := &fakeHost{Fake: sluicetest.New()}
	f.Self = "JobQueueLeader/main"
	sluice.SetBackend(f)
	return f
}

// script has every dispatch answer these per-target outcomes.
func script(f *fakeHost, outcomes ...sluice.DispatchOutcome) {
	r := sluice.NewDispatchResult(outcomes...)
	f.Result = &r
}

func call(t *testing.T, role Role, msgType string, payload string) map[string]any {
	t.Helper()
	out, err := role.Handle(context.Background(), &sluice.Envelope{MsgType: msgType, Payload: []byte(payload)})
	if err != nil {
		t.Fatalf("%s: %v", msgType, err)
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%s reply %q: %v", msgType, out, err)
	}
	return v
}

func dispatches(f *fakeHost) []*sluice.DispatchRequest {
	var out []*sluice.DispatchRequest
	for _, c := range f.Calls {
		if c.Op == "dispatch" {
			out = append(out, c.Req)
		}
	}
	return out
}

func payloadOf(t *testing.T, req *sluice.DispatchRequest) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(req.Payload, &v); err != nil {
		t.Fatalf("payload %q: %v", req.Payload, err)
	}
	return v
}

func TestThunderingHerdDispatchesTheSameTaskTwiceWithOneKey(t *testing.T) {
	f := newFake(t)
	// The first dispatch delivers three and queues two at the relay's limit; the second is
	// absorbed whole by the key.
	n := 0
	f.DispatchResultFunc = func(req sluice.DispatchRequest) sluice.DispatchResult {
		n++
		d, q, dup := sluice.OutcomeDelivered, sluice.OutcomeQueuedAtLimit, sluice.OutcomeDeduplicated
		if n == 1 {
			return sluice.NewDispatchResult(d, d, d, q, q)
		}
		return sluice.NewDispatchResult(dup, dup, dup, dup, dup)
	}
	got := call(t, NewJobQueueLeader(), "thundering_herd", `{"workers": 5, "task_id": "herd-9"}`)
	reqs := dispatches(f)
	if len(reqs) != 2 {
		t.Fatalf("want the dispatch and its redelivery, got %d dispatches", len(reqs))
	}
	for _, r := range reqs {
		if r.IdempotencyKey != "herd-9" || r.Conflict != sluice.ConflictAppend || r.Mode != sluice.ModeCast ||
			r.DispatcherID != dispatcherID || r.Context != dispatchCtx || len(r.Targets) != 5 ||
			r.Targets[4] != "Worker/worker-4" || r.MsgType != "dispatch" {
			t.Fatalf("request %+v", r)
		}
		want := map[string]any{"task": "thundering_herd", "priority": "high", "task_id": "herd-9"}
		if p := payloadOf(t, r); !reflect.DeepEqual(p, want) {
			t.Fatalf("payload %v", p)
		}
	}
	if got["targets"] != 5.0 || got["delivered"] != 3.0 || got["queued"] != 2.0 || got["deduplicated"] != 0.0 {
		t.Fatalf("reply %v", got)
	}
	if re := got["redelivery"].(map[string]any); re["deduplicated"] != 5.0 || re["delivered"] != 0.0 {
		t.Fatalf("redelivery %v", re)
	}
	if _, ok := got["wall_ms"]; !ok {
		t.Fatalf("no wall_ms: %v", got)
	}
}

func TestConfigWaveDeploySendsEveryWorkerItsDownloadAndSumsQueuedDownloads(t *testing.T) {
	f := newFake(t)
	script(f, sluice.OutcomeDelivered, sluice.OutcomeQueuedRefused)
	got := call(t, NewJobQueueLeader(), "config_wave_deploy", `{"workers": 5, "wave_size": 2, "version": "2.1.0"}`)
	reqs := dispatches(f)
	// 3 waves (2, 2, 1 workers) + 5 downloads.
	if len(reqs) != 8 {
		t.Fatalf("%d dispatches", len(reqs))
	}
	var downloads []string
	for _, r := range reqs {
		p := payloadOf(t, r)
		if strings.HasPrefix(r.Targets[0], "ConfigServer/") {
			w := p["worker"].(string)
			i := strings.TrimPrefix(w, "Worker/worker-")
			// Waves of two: workers 0-1 are wave 0, 2-3 wave 1, 4 wave 2.
			wantServer := map[string]string{"0": "cs-0", "1": "cs-0", "2": "cs-1", "3": "cs-1", "4": "cs-0"}[i]
			if r.Targets[0] != "ConfigServer/"+wantServer || r.IdempotencyKey != "dl-2.1.0-"+w || p["download"] != "2.1.0" {
				t.Fatalf("download %+v %v", r, p)
			}
			downloads = append(downloads, w)
		} else if r.IdempotencyKey != "config-2.1.0" || p["task"] != "config" || p["version"] != "2.1.0" {
			t.Fatalf("config %+v %v", r, p)
		}
	}
	if want := workerIDs(5); !reflect.DeepEqual(downloads, want) {
		t.Fatalf("downloads %v", downloads)
	}
	waves := got["waves"].([]any)
	if len(waves) != 3 || waves[2].(map[string]any)["targets"] != 1.0 || waves[1].(map[string]any)["wave"] != 1.0 {
		t.Fatalf("waves %v", waves)
	}
	total := got["total"].(map[string]any)
	if total["delivered"] != 3.0 || total["queued"] != 3.0 || got["config_server_queued"] != 5.0 {
		t.Fatalf("reply %v", got)
	}
}

func TestSendHeartbeatCountsUpAndOverwritesOneKey(t *testing.T) {
	f := newFake(t)
	leader := NewJobQueueLeader()
	for seq := 1; seq <= 2; seq++ {
		got := call(t, leader, "send_heartbeat", `{"workers": 3}`)
		if got["seq"] != float64(seq) {
			t.Fatalf("reply %v", got)
		}
	}
	reqs := dispatches(f)
	r := reqs[1]
	if r.IdempotencyKey != heartbeatIdemKey || r.Conflict != sluice.ConflictOverwrite || len(r.Targets) != 3 {
		t.Fatalf("request %+v", r)
	}
	if p := payloadOf(t, r); p["type"] != "heartbeat" || p["seq"] != 2.0 || p["cpu"] != 0.42 {
		t.Fatalf("payload %v", p)
	}
}

func TestLeaderRecordsHeartbeatsOnceAndTakesThemAsDispatch(t *testing.T) {
	newFake(t)
	leader := NewJobQueueLeader()
	for _, seq := range []int{3, 3, 7} {
		call(t, leader, "dispatch", fmt.Sprintf(`{"type":"heartbeat","seq":%d,"cpu":0.42}`, seq))
	}
	call(t, leader, "heartbeat", `{"type":"heartbeat","seq":9}`)
	if got := call(t, leader, "heartbeats", `{}`); !reflect.DeepEqual(got["seqs"], []any{3.0, 7.0, 9.0}) {
		t.Fatalf("seqs %v", got)
	}
	if _, err := leader.Handle(context.Background(), &sluice.Envelope{MsgType: "dispatch", Payload: []byte(`{"task":"x"}`)}); !errors.Is(err, sluice.ErrInvalidArgument) {
		t.Fatalf("non-heartbeat dispatch: %v", err)
	}
}

func TestHeartbeatBurstAsksWorker101AndRelaysItsReply(t *testing.T) {
	f := newFake(t)
	f.AskReply = []byte(`{"sent":50,"delivered":9,"deduplicated":41,"queued":0,"dead_lettered":0}`)
	out, err := NewJobQueueLeader().Handle(context.Background(), &sluice.Envelope{MsgType: "heartbeat_burst", Payload: []byte(`{"count":50}`)})
	if err != nil || string(out) != string(f.AskReply) {
		t.Fatalf("%q %v", out, err)
	}
	c := f.Calls[0]
	if c.Op != "ask" || c.To != "Worker/worker-101" || c.MsgType != "send_heartbeats" ||
		string(c.Payload) != `{"count":50,"to":"JobQueueLeader/main"}` || c.TimeoutMs == 0 || c.TimeoutMs > heartbeatAskMs {
		t.Fatalf("call %+v", c)
	}
}

func TestTelemetryFallsBackToTheOutboxOnAnyAskError(t *testing.T) {
	f := newFake(t)
	f.askErr = func(_ string, payload []byte) error {
		var p struct{ Seq int }
		json.Unmarshal(payload, &p)
		switch p.Seq % 3 {
		case 1:
			return sluice.ResourceExhausted("RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=3)", 3)
		case 2:
			return sluice.NewError(sluice.CodeDeadlineExceeded, "DEADLINE_EXCEEDED: call-timeout")
		}
		return nil
	}
	bursts := 0
	f.tellErr = func(string, []byte) error {
		bursts++
		if bursts%6 >= 4 { // the collector's four slots are full
			return sluice.ResourceExhausted("RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=1)", 1)
		}
		return nil
	}
	got := call(t, NewJobQueueLeader(), "telemetry_test", `{"count": 30}`)
	if got["count"] != 30.0 || got["fast_path_success"] != 10.0 || got["outbox_fallback"] != 20.0 || got["burst_refused"] != 6.0 {
		t.Fatalf("reply %v", got)
	}
	reqs := dispatches(f)
	if len(reqs) != 20 || reqs[0].IdempotencyKey != "tel-1" || reqs[0].Targets[0] != "TelemetryCollector/main" {
		t.Fatalf("fallbacks %d, first %+v", len(reqs), reqs[0])
	}
	if p := payloadOf(t, reqs[1]); p["seq"] != 2.0 || p["cpu"] != 0.5 || p["mem"] != 0.8 {
		t.Fatalf("fallback payload %v", p)
	}
	// A burst of 6 tells precedes samples 0, 10 and 20.
	if f.Calls[0].Op != "tell" || f.Calls[6].Op != "ask" || string(f.Calls[5].Payload) != `{"n":5,"seq":0,"type":"burst"}` {
		t.Fatalf("calls %+v %+v", f.Calls[0], f.Calls[6])
	}
}

func TestTelemetryFailsOnAnUnexpectedTellError(t *testing.T) {
	f := newFake(t)
	f.tellErr = func(string, []byte) error { return sluice.NotFound("NOT_FOUND: no such actor type") }
	_, err := NewJobQueueLeader().Handle(context.Background(), &sluice.Envelope{MsgType: "telemetry_test", Payload: []byte(`{"count": 1}`)})
	if !errors.Is(err, sluice.ErrNotFound) {
		t.Fatalf("%v", err)
	}
}

func TestFirmwareRolloutAndPoisonUseCallMode(t *testing.T) {
	f := newFake(t)
	q := sluice.OutcomeQueuedFailed
	script(f, q, q, q, q)
	got := call(t, NewJobQueueLeader(), "firmware_rollout", `{"devices": 4, "count": 3}`)
	if got["targets"] != 4.0 || got["messages"] != 12.0 || got["delivered"] != 0.0 || got["queued"] != 12.0 {
		t.Fatalf("reply %v", got)
	}
	reqs := dispatches(f)
	if len(reqs) != 3 || reqs[2].Mode != sluice.ModeCall || reqs[2].IdempotencyKey != "fw-2" || reqs[2].Targets[3] != "Device/dev-3" {
		t.Fatalf("requests %+v", reqs[2])
	}
	got = call(t, NewJobQueueLeader(), "poison", `{}`)
	r := dispatches(f)[3]
	if r.Mode != sluice.ModeCall || r.IdempotencyKey != "poison-1" || r.Targets[0] != "Worker/poison" || got["queued"] != 4.0 {
		t.Fatalf("poison %+v %v", r, got)
	}
	if p := payloadOf(t, r); p["body"] != "{malformed" {
		t.Fatalf("poison payload %v", p)
	}
}

func TestDispatchErrorsReachTheCaller(t *testing.T) {
	f := newFake(t)
	f.FailNext(sluice.Unavailable("UNAVAILABLE: the outbox is not enabled on this host"))
	_, err := NewJobQueueLeader().Handle(context.Background(), &sluice.Envelope{MsgType: "send_heartbeat", Payload: []byte(`{"workers":1}`)})
	var e *sluice.Error
	if !errors.As(err, &e) || e.Code != sluice.CodeUnavailable {
		t.Fatalf("%v", err)
	}
}
