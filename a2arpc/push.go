package a2arpc

import (
	"context"
	stdjson "encoding/json"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/agent-context/agent-context/contract"
	"github.com/agent-context/agent-context/runtime"
	"github.com/agent-context/agent-context/runtime/a2a"
)

// This file is the push notification half of POST /a2a: set, get, list and delete a
// task's webhook configs, in the shapes of each generation. 0.3 wraps a config as
// {taskId, pushNotificationConfig: {id, url, token, authentication}}; 1.0 flattens
// it to {taskId, id, url, token, authentication} and lists as {configs}.

// pushParams are the members of the push methods' params in both generations.
type pushParams struct {
	ID       *string `json:"id"`
	TaskID   *string `json:"taskId"`
	ConfigID *string `json:"pushNotificationConfigId"`
	// The config of a set: nested (0.3) or flat (1.0, where id is the config's).
	Config         *pushConfigParams `json:"pushNotificationConfig"`
	URL            *string           `json:"url"`
	Token          *string           `json:"token"`
	Authentication jsontext.Value    `json:"authentication"`
}

type pushConfigParams struct {
	ID             *string        `json:"id"`
	URL            *string        `json:"url"`
	Token          *string        `json:"token"`
	Authentication jsontext.Value `json:"authentication"`
}

// rpcPush serves the push config methods.
func (d *Door) rpcPush(ctx context.Context, p runtime.Principal, method string, params jsontext.Value, gen generation) (any, *rpcFailure, error) {
	var req pushParams
	if fail := decodeParams(params, &req); fail != nil {
		return nil, fail, nil
	}
	switch method {
	case contract.MethodV03PushSet, contract.MethodV1CreatePushConfig:
		return d.rpcPushSet(ctx, p, &req, gen)
	}
	// The task is params.id in 0.3 and params.taskId in 1.0, where params.id is the
	// config.
	taskID, configID := req.ID, req.ConfigID
	if gen == gen10 {
		taskID, configID = req.TaskID, req.ID
	}
	if taskID == nil {
		return nil, rpcFail(contract.RPCInvalidParams, "params.%s names the task", map[generation]string{gen03: "id", gen10: "taskId"}[gen]), nil
	}
	switch method {
	case contract.MethodV03PushList, contract.MethodV1ListPushConfigs:
		configs, err := d.protocol.PushConfigs(ctx, p, *taskID, nil)
		if err != nil {
			return nil, nil, err
		}
		out := make([]any, len(configs))
		for i := range configs {
			out[i] = rpcPushConfig(&configs[i], gen)
		}
		if gen == gen10 {
			return map[string]any{"configs": out}, nil, nil
		}
		return out, nil, nil
	case contract.MethodV03PushGet, contract.MethodV1GetPushConfig:
		configs, err := d.protocol.PushConfigs(ctx, p, *taskID, configID)
		if err != nil {
			return nil, nil, err
		}
		if len(configs) == 0 {
			return nil, rpcFail(contract.RPCTaskNotFound, "the task has no push notification config"), nil
		}
		return rpcPushConfig(&configs[0], gen), nil, nil
	}
	if configID == nil {
		return nil, rpcFail(contract.RPCInvalidParams, "params.%s names the config", map[generation]string{gen03: "pushNotificationConfigId", gen10: "id"}[gen]), nil
	}
	if err := d.protocol.DeletePushConfig(ctx, p, *taskID, *configID); err != nil {
		return nil, nil, err
	}
	return nil, nil, nil
}

func (d *Door) rpcPushSet(ctx context.Context, p runtime.Principal, req *pushParams, gen generation) (any, *rpcFailure, error) {
	if req.TaskID == nil {
		return nil, rpcFail(contract.RPCInvalidParams, "params.taskId is required"), nil
	}
	in := req.Config
	if in == nil {
		in = &pushConfigParams{ID: req.ID, URL: req.URL, Token: req.Token, Authentication: req.Authentication}
	}
	if in.URL == nil {
		return nil, rpcFail(contract.RPCInvalidParams, "the config's url is required"), nil
	}
	c := a2a.PushConfig{TaskID: *req.TaskID, URL: *in.URL, Token: in.Token, Protocol: a2a.PushProtocol03}
	if gen == gen10 {
		c.Protocol = a2a.PushProtocol10
	}
	if in.ID != nil {
		c.ID = *in.ID
	}
	switch in.Authentication.Kind() {
	case 0, 'n':
	case '{':
		compact := in.Authentication.Clone()
		if err := compact.Compact(); err != nil {
			return nil, rpcFail(contract.RPCInvalidParams, "the config's authentication is invalid"), nil
		}
		c.Authentication = []byte(compact)
	default:
		return nil, rpcFail(contract.RPCInvalidParams, "the config's authentication must be an object"), nil
	}
	stored, err := d.protocol.SetPushConfig(ctx, p, &c)
	if err != nil {
		return nil, nil, err
	}
	return rpcPushConfig(stored, gen), nil, nil
}

// rpcPushConfig writes a config for gen.
func rpcPushConfig(c *a2a.PushConfig, gen generation) any {
	config := map[string]any{"id": c.ID, "url": c.URL}
	if c.Token != nil {
		config["token"] = *c.Token
	}
	if c.Authentication != nil {
		config["authentication"] = stdjson.RawMessage(c.Authentication)
	}
	if gen == gen10 {
		config["taskId"] = c.TaskID
		return config
	}
	return map[string]any{"taskId": c.TaskID, "pushNotificationConfig": config}
}

// A2APushBody is the body of a push notification (a2a.PushBody): the Task in 0.3,
// a StreamResponse holding it in 1.0.
func A2APushBody(t *contract.Task, protocol string) ([]byte, error) {
	if protocol == a2a.PushProtocol10 {
		task := rpcTask(t, gen10, nil)
		return stdjson.Marshal(contract.RPCStreamResponse{Task: &task})
	}
	return stdjson.Marshal(rpcTask(t, gen03, nil))
}
