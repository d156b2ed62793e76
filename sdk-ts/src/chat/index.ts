// @zidane/sdk/chat: the live-event reducer and the session stream store.
export { applyLiveEvent, closeOpenBlock, isOpenBlock } from './reducer.js'
export { createSessionStreams, createSessionStreamActions, isEditEvent, EMPTY_SESSION } from './streams.js'
export type {
  FrameScheduler,
  SessionPage,
  SessionSnapshot,
  SessionStreams,
  SessionStreamsOptions,
  SessionStreamActions,
  StreamProgress,
  StreamSource,
  LoadEvents,
  TranscriptPage,
} from './streams.js'
