// The object host of a workerd process (`Objects::Host`,
// e2e/src/workerd.rs): other processes' Workers (front.js) reach this
// process's queue objects through it, one object per queue for all of them,
// on a Unix socket only this user can reach.
export default {
  async fetch(request, env) {
    const name = decodeURIComponent(request.headers.get("x-object") ?? "");
    const object = env.MQLITE_WAKER.getByName(name);
    if (new URL(request.url).pathname === "/commit") {
      const db = decodeURIComponent(request.headers.get("x-db") ?? "");
      const pipeline = new Uint8Array(await request.arrayBuffer());
      const wakes = request.headers.get("x-wakes") === "1";
      try {
        const [said, body] = await object.commit(db, pipeline, wakes);
        return new Response(body, { headers: { "x-said": said } });
      } catch (e) {
        // The platform's words (a refusal before delivery, an overloaded
        // object) reach the Worker, which tells them apart by them.
        return new Response(String(e), { status: 502 });
      }
    }
    return object.fetch(request.headers.get("x-url"), { method: request.method });
  },
};
