// The Worker of a workerd process whose queue objects live in another
// process (`Objects::Remote`, e2e/src/workerd.rs): `MQLITE_WAKER` becomes a
// namespace whose objects answer over HTTP, on a Unix socket, from the
// process that hosts them (objects.js), as a deployment's Workers reach one object per queue
// wherever it runs. The Worker calls only `getByName`, the object's
// `commit` (Workers RPC) and its `fetch(url, {method})`
// (src/worker_shell/waker.rs); `worker` accepts a binding whose constructor
// is named `DurableObjectNamespace`.
import Worker from "./index.js";

class DurableObjectNamespace {
  constructor(host) {
    this.host = host;
  }

  getByName(name) {
    return new RemoteObject(this.host, name);
  }
}

class RemoteObject {
  constructor(host, name) {
    this.host = host;
    this.name = encodeURIComponent(name);
  }

  async commit(db, pipeline, wakes) {
    const answer = await this.host.fetch("http://objects/commit", {
      method: "POST",
      headers: {
        "x-object": this.name,
        "x-db": encodeURIComponent(db),
        "x-wakes": wakes ? "1" : "0",
      },
      body: pipeline,
    });
    if (answer.status !== 200) {
      // What the host caught, as the platform said it.
      throw new Error(await answer.text());
    }
    const said = answer.headers.get("x-said");
    return [said, new Uint8Array(await answer.arrayBuffer())];
  }

  fetch(url, init) {
    return this.host.fetch("http://objects/fetch", {
      method: init?.method ?? "GET",
      headers: { "x-object": this.name, "x-url": url },
    });
  }
}

export default {
  fetch(request, env, ctx) {
    const shared = { ...env, MQLITE_WAKER: new DurableObjectNamespace(env.MQLITE_OBJECTS) };
    // Constructed as the runtime would (the export's construct trap is
    // where the module recovers from a trap in wasm).
    return new Worker(ctx, shared).fetch(request);
  },
};
