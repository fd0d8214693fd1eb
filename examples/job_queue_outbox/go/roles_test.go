package main

import (
	"context"
	"errors"
	"reflect"
	"testing"

	sluice "sluice.dev/guest"
)

func initRole(t *testing.T, config string) Role {
	t.Helper()
	j := &jobQueue{}
	if err := j.Init(config); err != nil {
		t.Fatalf("init %s: %v", config, err)
	}
	return j.role
}

func TestInitPicksTheRoleAndRefusesAnUnknownOne(t *testing.T) {
	newFake(t)
	if _, ok := initRole(t, `{"role":"leader"}`).(*JobQueueLeader); !ok {
		t.Fatal("leader")
	}
	if d := initRole(t, `{"role":"device"}`).(*Device); !d.online {
		t.Fatal("a device is online unless its init says otherwise")
	}
	if err := (&jobQueue{}).Init(`{"role":"manager"}`); !errors.Is(err, sluice.ErrInvalidArgument) {
		t.Fatalf("%v", err)
	}
}

func TestWorkerRecordsEachTaskOnceAndFailsAMalformedOneUntilFixed(t *testing.T) {
	newFake(t)
	w := initRole(t, `{"role":"worker"}`)
	herd := `{"task":"thundering_herd","priority":"high","task_id":"herd-1"}`
	call(t, w, "dispatch", herd)
	call(t, w, "process", herd)
	call(t, w, "dispatch", `{"task":"config","version":"2.1.0"}`)
	call(t, w, "dispatch", `{"type":"heartbeat","seq":1,"cpu":0.42}`)
	call(t, w, "dispatch", `{"type":"heartbeat","seq":2,"cpu":0.42}`)
	poison := &sluice.Envelope{MsgType: "dispatch", Payload: []byte(`{"task":"poison","body":"{malformed"}`)}
	_, err := w.Handle(context.Background(), poison)
	var e *sluice.Error
	if !errors.As(err, &e) || e.Code != sluice.CodeInvalidArgument || e.Message != "INVALID_ARGUMENT: malformed task" {
		t.Fatalf("poison: %v", err)
	}
	call(t, w, "fix", `{}`)
	call(t, w, "dispatch", string(poison.Payload))
	got := call(t, w, "state", "")
	want := map[string]any{
		"tasks":          map[string]any{"herd-1": 1.0, "poison": 1.0},
		"config_version": "2.1.0",
		"heartbeats":     []any{1.0, 2.0},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("state %v", got)
	}
}

func TestFreshWorkerStateHasNullVersionAndEmptyLists(t *testing.T) {
	newFake(t)
	got := call(t, initRole(t, `{"role":"worker"}`), "state", "{}")
	want := map[string]any{"tasks": map[string]any{}, "config_version": nil, "heartbeats": []any{}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("state %v", got)
	}
}

func TestWorkerSendsOverwritingHeartbeats(t *testing.T) {
	f := newFake(t)
	script(f, sluice.OutcomeDelivered)
	got := call(t, initRole(t, `{"role":"worker"}`), "send_heartbeats", `{"count":4,"to":"JobQueueLeader/main"}`)
	if got["sent"] != 4.0 || got["delivered"] != 4.0 || got["queued"] != 0.0 {
		t.Fatalf("reply %v", got)
	}
	reqs := dispatches(f)
	if len(reqs) != 4 || reqs[3].Conflict != sluice.ConflictOverwrite || reqs[3].IdempotencyKey != heartbeatIdemKey ||
		reqs[3].Targets[0] != "JobQueueLeader/main" || string(reqs[3].Payload) != `{"type":"heartbeat","seq":4,"cpu":0.42}` {
		t.Fatalf("requests %+v", reqs[3])
	}
}

func TestConfigServerAndCollectorRecordOncePerId(t *testing.T) {
	newFake(t)
	// No work_ms in init: the fake's clock stands still, so a busy-wait would never end.
	cs := initRole(t, `{"role":"config_server"}`)
	call(t, cs, "dispatch", `{"download":"2.1.0","worker":"worker-3"}`)
	call(t, cs, "dispatch", `{"download":"2.1.0","worker":"worker-3"}`)
	call(t, cs, "dispatch", `{"download":"2.1.0","worker":"worker-1"}`)
	if got := call(t, cs, "state", ""); !reflect.DeepEqual(got["served"], []any{"worker-3", "worker-1"}) {
		t.Fatalf("served %v", got)
	}
	c := initRole(t, `{"role":"collector"}`)
	call(t, c, "process", `{"type":"telemetry","seq":0}`)
	call(t, c, "dispatch", `{"type":"telemetry","seq":0,"cpu":0.5,"mem":0.8}`)
	call(t, c, "process", `{"type":"burst","seq":0,"n":1}`)
	if got := call(t, c, "state", ""); !reflect.DeepEqual(got, map[string]any{"telemetry": []any{0.0}, "bursts": 1.0}) {
		t.Fatalf("collector %v", got)
	}
}

func TestOfflineDeviceFailsUnavailableAndOnlineOneRecordsInOrder(t *testing.T) {
	newFake(t)
	off := initRole(t, `{"role":"device","online":false}`)
	_, err := off.Handle(context.Background(), &sluice.Envelope{MsgType: "dispatch", Payload: []byte(`{"firmware":0}`)})
	var e *sluice.Error
	if !errors.As(err, &e) || !errors.Is(err, sluice.ErrResourceExhausted) || e.Message != "RESOURCE_EXHAUSTED: device offline (retry_after_ms=1000)" || *e.RetryAfterMs != 1000 {
		t.Fatalf("%v", err)
	}
	on := initRole(t, `{"role":"device","online":true}`)
	for _, k := range []string{"0", "1", "1", "2"} {
		call(t, on, "dispatch", `{"firmware":`+k+`}`)
	}
	if got := call(t, on, "state", ""); !reflect.DeepEqual(got["firmware"], []any{0.0, 1.0, 2.0}) {
		t.Fatalf("firmware %v", got)
	}
}
