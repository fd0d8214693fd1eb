package main

import (
	"context"
	"errors"
	"fmt"

	sluice "sluice.dev/guest"
	"sluice.dev/guest/host"
)

const (
	collectorID     = "TelemetryCollector/main"
	burstWorkerID   = "Worker/worker-101"
	poisonWorkerID  = "Worker/poison"
	burstEvery      = 10 // a burst before every 10th telemetry sample
	burstSize       = 6  // tells per burst: more than the collector's 4 slots
	telemetryAskMs  = 2000
	heartbeatAskMs  = 20000
	configServers   = 2
	defaultWorkers  = 100
	defaultWaveSize = 20
)

// JobQueueLeader runs the scenarios; the driver asks it one message per scenario.
type JobQueueLeader struct {
	// HeartbeatCount is the seq of the last send_heartbeat (the first call sends 1).
	HeartbeatCount int
	// heartbeats are the seqs of the heartbeats the leader itself received.
	heartbeats heartbeatLog
}

// NewJobQueueLeader returns a leader that has sent and received no heartbeat.
func NewJobQueueLeader() *JobQueueLeader { return &JobQueueLeader{} }

// Handle runs one scenario or records a heartbeat.
func (j *JobQueueLeader) Handle(ctx context.Context, env *sluice.Envelope) ([]byte, error) {
	switch env.MsgType {
	case "thundering_herd":
		return j.handleThunderingHerd(ctx, env)
	case "config_wave_deploy":
		return j.handleConfigWaveDeploy(ctx, env)
	case "send_heartbeat":
		return j.handleSendHeartbeat(ctx, env)
	case "heartbeat_burst":
		return j.handleHeartbeatBurst(ctx, env)
	case "telemetry_test":
		return j.handleTelemetryTest(ctx, env)
	case "firmware_rollout":
		return j.handleFirmwareRollout(ctx, env)
	case "poison":
		return j.handlePoison(ctx)
	case "heartbeats", "state":
		return sluice.Reply(map[string]any{"seqs": j.heartbeats.list()})
	case "heartbeat", sluice.DefaultDispatchMsgType:
		// The outbox delivers with msg-type "dispatch": any message whose JSON says
		// "type":"heartbeat" is a heartbeat.
		var hb heartbeat
		if err := decode(env, &hb); err != nil {
			return nil, err
		}
		if hb.Type != "heartbeat" {
			return nil, sluice.InvalidArgument(
				fmt.Sprintf("INVALID_ARGUMENT: the leader takes only heartbeats, not %q", env.Text()))
		}
		j.heartbeats.record(hb.Seq)
		return sluice.Reply(map[string]any{"seq": hb.Seq})
	}
	return nil, unknown("JobQueueLeader", env)
}

// workerIDs are Worker/worker-0 … Worker/worker-(n-1).
func workerIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("Worker/worker-%d", i)
	}
	return ids
}

// counts adds up what one or more dispatches did with their targets: delivered now, absorbed
// by the idempotency key, queued for the relay, or dead-lettered at once.
type counts struct {
	Delivered    uint32 `json:"delivered"`
	Deduplicated uint32 `json:"deduplicated"`
	Queued       uint32 `json:"queued"`
	DeadLettered uint32 `json:"dead_lettered"`
}

func countsOf(r *sluice.DispatchResult) counts {
	return counts{r.Delivered, r.Deduplicated, r.Queued, r.DeadLettered}
}

func (c *counts) add(r *sluice.DispatchResult) {
	c.Delivered += r.Delivered
	c.Deduplicated += r.Deduplicated
	c.Queued += r.Queued
	c.DeadLettered += r.DeadLettered
}

// handleThunderingHerd fans one task out to every worker at once, then dispatches it again
// with the same idempotency key: the redelivery must be absorbed.
func (j *JobQueueLeader) handleThunderingHerd(ctx context.Context, env *sluice.Envelope) ([]byte, error) {
	req := struct {
		Workers int    `json:"workers"`
		TaskID  string `json:"task_id"`
	}{Workers: defaultWorkers, TaskID: "herd-1"}
	if err := decode(env, &req); err != nil {
		return nil, err
	}
	targets := workerIDs(req.Workers)
	herdPayload := map[string]any{"task": "thundering_herd", "priority": "high", "task_id": req.TaskID}

	t0 := host.NowMs()
	first, err := host.Outbox().DispatchWithTargets(ctx, dispatchCtx, dispatcherID, targets, herdPayload,
		sluice.ModeCast, req.TaskID, sluice.ConflictAppend)
	if err != nil {
		return nil, fmt.Errorf("thundering_herd: %w", err)
	}
	wallMs := host.NowMs() - t0
	// The very same dispatch again: a redelivery the idempotency key absorbs.
	again, err := host.Outbox().DispatchWithTargets(ctx, dispatchCtx, dispatcherID, targets, herdPayload,
		sluice.ModeCast, req.TaskID, sluice.ConflictAppend)
	if err != nil {
		return nil, fmt.Errorf("thundering_herd redelivery: %w", err)
	}
	// Queued messages wait in the outbox; the relay delivers them with AIMD and backoff.
	return sluice.Reply(struct {
		Targets int `json:"targets"`
		counts
		WallMs     uint64 `json:"wall_ms"`
		Redelivery counts `json:"redelivery"`
	}{len(targets), countsOf(first), wallMs, countsOf(again)})
}

type waveResult struct {
	Wave    int `json:"wave"`
	Targets int `json:"targets"`
	counts
	WallMs uint64 `json:"wall_ms"`
}

// handleConfigWaveDeploy rolls a config version out in waves; every worker of a wave also
// downloads it from a config server, whose two-slot mailbox fills: the relay backs off.
func (j *JobQueueLeader) handleConfigWaveDeploy(ctx context.Context, env *sluice.Envelope) ([]byte, error) {
	req := struct {
		Workers  int    `json:"workers"`
		WaveSize int    `json:"wave_size"`
		Version  string `json:"version"`
	}{Workers: defaultWorkers, WaveSize: defaultWaveSize, Version: "2.1.0"}
	if err := decode(env, &req); err != nil {
		return nil, err
	}
	if req.WaveSize <= 0 {
		return nil, sluice.InvalidArgument("INVALID_ARGUMENT: wave_size must be positive")
	}
	workers := workerIDs(req.Workers)
	configPayload := map[string]any{"task": "config", "version": req.Version}
	waves := []waveResult{}
	var total, servers counts
	for start, wave := 0, 0; start < len(workers); start, wave = start+req.WaveSize, wave+1 {
		end := min(start+req.WaveSize, len(workers))
		targets := workers[start:end]
		t0 := host.NowMs()
		result, err := host.Outbox().DispatchWithTargets(ctx, dispatchCtx, dispatcherID, targets,
			configPayload, sluice.ModeCast, "config-"+req.Version, sluice.ConflictAppend)
		if err != nil {
			return nil, fmt.Errorf("config wave %d: %w", wave, err)
		}
		waves = append(waves, waveResult{wave, len(targets), countsOf(result), host.NowMs() - t0})
		total.add(result)
		// Every worker of the wave downloads the version from the wave's server,
		// cs-(wave mod 2): it takes one at a time with two slots, so it fills; queued
		// downloads wait in the outbox.
		server := fmt.Sprintf("ConfigServer/cs-%d", wave%configServers)
		for i := start; i < end; i++ {
			w := workers[i]
			download := map[string]any{"download": req.Version, "worker": w}
			dl, err := host.Outbox().DispatchWithTargets(ctx, dispatchCtx, dispatcherID, []string{server},
				download, sluice.ModeCast, "dl-"+req.Version+"-"+w, sluice.ConflictAppend)
			if err != nil {
				return nil, fmt.Errorf("download for %s: %w", w, err)
			}
			servers.add(dl)
		}
	}
	return sluice.Reply(map[string]any{
		"waves":                waves,
		"total":                total,
		"config_server_queued": servers.Queued,
	})
}

// handleSendHeartbeat is the seed's single heartbeat to every worker: one key, OVERWRITE,
// so a worker that has not taken the previous one yet gets only the newest.
func (j *JobQueueLeader) handleSendHeartbeat(ctx context.Context, env *sluice.Envelope) ([]byte, error) {
	req := struct {
		Workers int `json:"workers"`
	}{Workers: defaultWorkers}
	if err := decode(env, &req); err != nil {
		return nil, err
	}
	j.HeartbeatCount++
	seq := j.HeartbeatCount
	hbPayload := heartbeat{Type: "heartbeat", Seq: seq, CPU: 0.42}
	result, err := host.Outbox().DispatchWithTargets(ctx, dispatchCtx, dispatcherID, workerIDs(req.Workers),
		hbPayload, sluice.ModeCast, heartbeatIdemKey, sluice.ConflictOverwrite)
	if err != nil {
		return nil, fmt.Errorf("send_heartbeat %d: %w", seq, err)
	}
	return sluice.Reply(struct {
		Seq int `json:"seq"`
		counts
	}{seq, countsOf(result)})
}

// handleHeartbeatBurst has Worker/worker-101 send the leader a burst of heartbeats while the
// leader is busy in this very turn: its mailbox fills and the outbox coalesces the rest.
func (j *JobQueueLeader) handleHeartbeatBurst(ctx context.Context, env *sluice.Envelope) ([]byte, error) {
	req := struct {
		Count int `json:"count"`
	}{Count: 50}
	if err := decode(env, &req); err != nil {
		return nil, err
	}
	reply, err := ask(ctx, heartbeatAskMs, burstWorkerID, "send_heartbeats",
		map[string]any{"count": req.Count, "to": host.SelfID()})
	if err != nil {
		return nil, fmt.Errorf("heartbeat_burst: %w", err)
	}
	return reply, nil
}

// handleTelemetryTest sends each sample by a direct ask first and falls back to the outbox
// on any error. Bursts of tells keep the collector's mailbox full about half the time.
func (j *JobQueueLeader) handleTelemetryTest(ctx context.Context, env *sluice.Envelope) ([]byte, error) {
	req := struct {
		Count int `json:"count"`
	}{Count: 200}
	if err := decode(env, &req); err != nil {
		return nil, err
	}
	fastPathOK, fallbackOK, burstRefused := 0, 0, 0
	for i := 0; i < req.Count; i++ {
		if i%burstEvery == 0 {
			for n := 0; n < burstSize; n++ {
				_, err := host.Tell(ctx, collectorID, "process", map[string]any{"type": "burst", "seq": i, "n": n})
				switch {
				case errors.Is(err, sluice.ErrResourceExhausted):
					burstRefused++
				case err != nil:
					return nil, fmt.Errorf("burst before sample %d: %w", i, err)
				}
			}
		}
		// Fast path: a direct ask, no outbox overhead when the collector has room.
		_, err := ask(ctx, telemetryAskMs, collectorID, "process", map[string]any{"type": "telemetry", "seq": i})
		if err == nil {
			fastPathOK++
			continue
		}
		// Fallback: the outbox, durable, retried with AIMD and backoff.
		telPayload := map[string]any{"type": "telemetry", "seq": i, "cpu": 0.5, "mem": 0.8}
		_, err = host.Outbox().DispatchWithTargets(ctx, dispatchCtx, dispatcherID, []string{collectorID},
			telPayload, sluice.ModeCast, fmt.Sprintf("tel-%d", i), sluice.ConflictAppend)
		if err != nil {
			return nil, fmt.Errorf("telemetry %d fallback: %w", i, err)
		}
		fallbackOK++
	}
	return sluice.Reply(map[string]any{
		"count":             req.Count,
		"fast_path_success": fastPathOK,
		"outbox_fallback":   fallbackOK,
		"burst_refused":     burstRefused,
	})
}

// handleFirmwareRollout sends every firmware to every device in call mode: a device that
// fails (offline) keeps its message in the outbox, and the later ones wait behind it.
func (j *JobQueueLeader) handleFirmwareRollout(ctx context.Context, env *sluice.Envelope) ([]byte, error) {
	req := struct {
		Devices int `json:"devices"`
		Count   int `json:"count"`
	}{Devices: 10, Count: 20}
	if err := decode(env, &req); err != nil {
		return nil, err
	}
	devices := make([]string, req.Devices)
	for i := range devices {
		devices[i] = fmt.Sprintf("Device/dev-%d", i)
	}
	var total counts
	for k := 0; k < req.Count; k++ {
		firmware := map[string]any{"firmware": k}
		result, err := host.Outbox().DispatchWithTargets(ctx, dispatchCtx, dispatcherID, devices, firmware,
			sluice.ModeCall, fmt.Sprintf("fw-%d", k), sluice.ConflictAppend)
		if err != nil {
			return nil, fmt.Errorf("firmware %d: %w", k, err)
		}
		total.add(result)
	}
	return sluice.Reply(struct {
		Targets  int `json:"targets"`
		Messages int `json:"messages"`
		counts
	}{req.Devices, req.Devices * req.Count, total})
}

// handlePoison dispatches a task the worker cannot parse, in call mode: every attempt fails
// until the message is dead-lettered.
func (j *JobQueueLeader) handlePoison(ctx context.Context) ([]byte, error) {
	poison := map[string]any{"task": "poison", "body": "{malformed"}
	result, err := host.Outbox().DispatchWithTargets(ctx, dispatchCtx, dispatcherID, []string{poisonWorkerID}, poison,
		sluice.ModeCall, "poison-1", sluice.ConflictAppend)
	if err != nil {
		return nil, fmt.Errorf("poison: %w", err)
	}
	return sluice.Reply(countsOf(result))
}
