package main

import (
	"context"
	"encoding/json"
	"fmt"

	sluice "sluice.dev/guest"
	"sluice.dev/guest/host"
)

// Worker executes tasks once each, holds a config version, and records heartbeats.
type Worker struct {
	tasks         map[string]int
	configVersion *string
	heartbeats    heartbeatLog
	fixed         bool // after `fix`, a task with a malformed body is accepted
}

// NewWorker returns a worker that has processed nothing.
func NewWorker() *Worker { return &Worker{tasks: map[string]int{}} }

// task is every message a worker takes on msg-type dispatch or process.
type task struct {
	Type    string  `json:"type"`
	Seq     int     `json:"seq"`
	Task    string  `json:"task"`
	TaskID  string  `json:"task_id"`
	Version *string `json:"version"`
	Body    *string `json:"body"`
}

// Handle processes a task or a heartbeat, or answers send_heartbeats, fix and state.
func (w *Worker) Handle(ctx context.Context, env *sluice.Envelope) ([]byte, error) {
	switch env.MsgType {
	case sluice.DefaultDispatchMsgType, "process", "heartbeat":
		var t task
		if err := decode(env, &t); err != nil {
			return nil, err
		}
		return w.process(t)
	case "send_heartbeats":
		return w.sendHeartbeats(ctx, env)
	case "fix":
		w.fixed = true
		return sluice.Reply(map[string]any{"fixed": true})
	case "state":
		return sluice.Reply(map[string]any{
			"tasks":          w.tasks,
			"config_version": w.configVersion,
			"heartbeats":     w.heartbeats.list(),
		})
	}
	return nil, unknown("Worker", env)
}

func (w *Worker) process(t task) ([]byte, error) {
	switch {
	case t.Type == "heartbeat":
		w.heartbeats.record(t.Seq)
		return sluice.Reply(map[string]any{"seq": t.Seq})
	case t.Task == "config":
		if t.Version == nil {
			return nil, sluice.InvalidArgument("INVALID_ARGUMENT: config task without version")
		}
		w.configVersion = t.Version
		return sluice.Reply(map[string]any{"config_version": *t.Version})
	case t.Task != "":
		if t.Body != nil && !json.Valid([]byte(*t.Body)) && !w.fixed {
			return nil, sluice.InvalidArgument("INVALID_ARGUMENT: malformed task")
		}
		id := t.TaskID
		if id == "" {
			id = t.Task
		}
		// At-least-once delivery, exactly-once processing: a task id counts once.
		if w.tasks[id] == 0 {
			w.tasks[id] = 1
		}
		return sluice.Reply(map[string]any{"task_id": id})
	}
	return nil, sluice.InvalidArgument("INVALID_ARGUMENT: neither a task nor a heartbeat")
}

// sendHeartbeats dispatches heartbeats 1..count to `to` as fast as it can, every one with the
// same key and OVERWRITE: while the receiver is busy only the newest stays pending.
func (w *Worker) sendHeartbeats(ctx context.Context, env *sluice.Envelope) ([]byte, error) {
	req := struct {
		Count int    `json:"count"`
		To    string `json:"to"`
	}{Count: 50, To: "JobQueueLeader/main"}
	if err := decode(env, &req); err != nil {
		return nil, err
	}
	var total counts
	for seq := 1; seq <= req.Count; seq++ {
		hbPayload := heartbeat{Type: "heartbeat", Seq: seq, CPU: 0.42}
		result, err := host.Outbox().DispatchWithTargets(ctx, dispatchCtx, dispatcherID, []string{req.To},
			hbPayload, sluice.ModeCast, heartbeatIdemKey, sluice.ConflictOverwrite)
		if err != nil {
			return nil, fmt.Errorf("heartbeat %d to %s: %w", seq, req.To, err)
		}
		total.add(result)
	}
	return sluice.Reply(struct {
		Sent int `json:"sent"`
		counts
	}{req.Count, total})
}
