// TESTKIT `echo`: the workhorse test actor (see guests/TESTKIT.md).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	sluice "sluice.dev/guest"
	"sluice.dev/guest/host"
)

type envelopeRecord struct {
	MsgType   string  `json:"msg_type"`
	Principal string  `json:"principal"`
	Sender    *string `json:"sender"`
}

type echo struct {
	config    string
	items     []string
	envelopes []envelopeRecord
}

func (a *echo) Init(config string) error {
	a.config = config
	return nil
}

func sender(env *sluice.Envelope) *string {
	if env.HasSender {
		s := env.Sender
		return &s
	}
	return nil
}

func (a *echo) Handle(ctx context.Context, env *sluice.Envelope) ([]byte, error) {
	msgType := env.MsgType
	if strings.HasPrefix(msgType, "evt.") {
		// Bus events arrive with msg-type = topic; `evt.*` topics are recorded.
		msgType = "record"
	}
	switch msgType {
	case "init_config":
		return []byte(a.config), nil
	case "whoami":
		var deadline any
		if env.HasDeadline {
			deadline = env.DeadlineMs
		}
		return sluice.Reply(map[string]any{"self_id": host.SelfID(), "principal": env.Principal,
			"sender": sender(env), "deadline_ms": deadline})
	case "now":
		return sluice.Reply(map[string]any{"now_ms": host.NowMs()})
	case "fail":
		return nil, sluice.InvalidArgument("bad input")
	case "throw":
		return nil, errors.New("plain failure")
	case "raise":
		// Any code, raised the SDK's way: {code, detail, retry_after_ms?, skipped?}.
		var req struct {
			Code         sluice.Code `json:"code"`
			Detail       string      `json:"detail"`
			RetryAfterMs *uint64     `json:"retry_after_ms"`
			Skipped      bool        `json:"skipped"`
		}
		if err := env.JSON(&req); err != nil {
			return nil, sluice.InvalidArgument("INVALID_ARGUMENT: bad raise request: " + err.Error())
		}
		e := sluice.Errorf(req.Code, "%s", req.Detail)
		e.RetryAfterMs = req.RetryAfterMs
		e.Skipped = req.Skipped
		return nil, e
	case "shed":
		return nil, &sluice.Error{Code: sluice.CodeOverloaded, Message: "OVERLOADED: shedding load",
			Scope: "actor", Depth: 7, Limit: 5}
	case "log":
		host.Log(sluice.LevelInfo, env.Text())
		return sluice.Reply(map[string]any{"ok": true})
	case "record":
		a.items = append(a.items, env.Text())
		a.envelopes = append(a.envelopes, envelopeRecord{env.MsgType, env.Principal, sender(env)})
		return sluice.Reply(map[string]any{"count": len(a.items)})
	case "recorded":
		items, envs := a.items, a.envelopes
		if items == nil {
			items, envs = []string{}, []envelopeRecord{}
		}
		return sluice.Reply(map[string]any{"items": items, "envelopes": envs})
	case "tell", "ask", "schedule", "tell_reliable", "remind", "cancel_reminder", "dispatch", "publish":
		var req request
		if len(env.Payload) > 0 {
			if err := json.Unmarshal(env.Payload, &req); err != nil {
				return nil, sluice.InvalidArgument("bad request: " + err.Error())
			}
		}
		res, err := callHost(ctx, env.MsgType, &req)
		if err != nil {
			var e *sluice.Error
			if errors.As(err, &e) {
				return sluice.Reply(map[string]any{"ok": false, "error": e.Report()})
			}
			return nil, err
		}
		res["ok"] = true
		return sluice.Reply(res)
	default:
		return env.Payload, nil
	}
}

// request is the payload of the host-call msg-types; mode and conflict are the WIT names
// ("cast", "overwrite", ...) and default to cast and append.
type request struct {
	Name           string              `json:"name"`
	To             string              `json:"to"`
	MsgType        string              `json:"msg_type"`
	Payload        string              `json:"payload"`
	TimeoutMs      uint64              `json:"timeout_ms"`
	DelayMs        uint64              `json:"delay_ms"`
	Targets        []string            `json:"targets"`
	Mode           sluice.DispatchMode `json:"mode"`
	IdempotencyKey string              `json:"idempotency_key"`
	Conflict       sluice.Conflict     `json:"conflict"`
	Context        string              `json:"context"`
	Topic          string              `json:"topic"`
}

func callHost(ctx context.Context, op string, r *request) (map[string]any, error) {
	switch op {
	case "tell":
		receipt, err := host.Tell(ctx, r.To, r.MsgType, r.Payload)
		return map[string]any{"receipt": receipt}, err
	case "ask":
		// timeout_ms bounds this call; without it the ask gets what is left of the turn's
		// deadline (sluice.DefaultAskTimeoutMs when the turn has none).
		if r.TimeoutMs > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Duration(r.TimeoutMs)*time.Millisecond)
			defer cancel()
		}
		reply, err := host.Ask(ctx, r.To, r.MsgType, r.Payload)
		return map[string]any{"reply": string(reply)}, err
	case "schedule":
		return map[string]any{}, host.Schedule(ctx, r.DelayMs, r.MsgType, r.Payload)
	case "tell_reliable":
		path, err := host.Outbox().TellReliable(ctx, r.To, r.MsgType, r.Payload)
		return map[string]any{"path": path}, err
	case "remind":
		return map[string]any{}, host.Outbox().Remind(ctx, r.Name, r.DelayMs, r.MsgType, r.Payload)
	case "cancel_reminder":
		cancelled, err := host.Outbox().CancelReminder(ctx, r.Name)
		return map[string]any{"cancelled": cancelled}, err
	case "dispatch":
		msgType := r.MsgType
		if msgType == "" {
			msgType = sluice.DefaultDispatchMsgType
		}
		res, err := host.Outbox().Dispatch(ctx, sluice.DispatchRequest{
			Context: r.Context, DispatcherID: host.SelfID(), MsgType: msgType, Targets: r.Targets,
			Payload: []byte(r.Payload), Mode: r.Mode, IdempotencyKey: r.IdempotencyKey, Conflict: r.Conflict,
		})
		if err != nil {
			return nil, err
		}
		return map[string]any{
			"delivered": res.Delivered, "deduplicated": res.Deduplicated, "queued": res.Queued,
			"dead_lettered": res.DeadLettered, "outcomes": res.Outcomes,
		}, nil
	default:
		return map[string]any{}, host.Bus().Publish(ctx, r.Topic, r.Payload)
	}
}

func init() { sluice.Register(&echo{}) }

func main() {}
