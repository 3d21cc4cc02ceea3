package mqtt

import "log/slog"

type sdkLogger = *slog.Logger

func loggerOf(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
