package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/zidane-server/zidane/server/agent"
	"github.com/zidane-server/zidane/server/agent/provider/config"
)

// modelSettings builds the agent's models, system prompt override and run limits from the
// operator's settings (docs/providers.md): the environment, --model, and --config or
// <data-dir>/config.json. It logs each provider (never a key) and every warning.
func modelSettings(ctx context.Context, log *slog.Logger, dataDir, configPath, model string, stepDelay time.Duration) (agent.Models, string, agent.Limits, error) {
	s, err := config.Build(config.Options{Path: configPath, DataDir: dataDir, Model: model, StepDelay: stepDelay})
	if err != nil {
		return nil, "", agent.Limits{}, err
	}
	reg, err := agent.NewRegistry(ctx, s.Default, s.Providers...)
	if err != nil {
		return nil, "", agent.Limits{}, err
	}
	reg.Windows = s.Windows
	if s.Path != "" {
		log.Info("config file read", "path", s.Path)
	}
	for _, line := range s.Summary {
		log.Info("model provider", "provider", line)
	}
	for _, w := range s.Warnings {
		log.Warn("model provider: " + w)
	}
	log.Info("default model", "model", s.Default)
	lim := agent.Limits{MaxTurns: s.Limits.MaxTurns, MaxWallTime: time.Duration(s.Limits.MaxWallTime), MaxOutputTokens: s.Limits.MaxOutputTokens, MaxConcurrentRuns: s.Limits.MaxConcurrentRuns, MaxTurnBytes: s.Limits.MaxTurnBytes}
	return reg, s.SystemPrompt, lim, nil
}
