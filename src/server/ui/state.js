// The chat page's shared state: the model's /props, the conversation on screen, the running
// generation (its AbortController), the settings, the mode and the list filter. Its own module,
// so that the view (view.js), generation (chat.js) and start-up (main.js) all read it without
// importing one another for it.
// `pending`: images attached to the message being written (data: URLs), sent with it;
// `pendingAudio`: its clips ({data: base64, format, name, seconds}, record.js).
export const state = {props: null, conv: null, running: null, settings: {}, textMode: false, filter: '', pending: [],
                      pendingAudio: []};
