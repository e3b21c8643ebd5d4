// "Add a document": POST /v1/documents with the write key (JSON for pasted text, multipart for a file), then
// the task is polled (GET /v1/tasks/{id}) until it succeeded or failed, and its outcome shown.
const $ = (sel) => document.querySelector(sel);

function show(text, failed = false) {
  const out = $("#add-result");
  out.textContent = text;
  out.classList.toggle("error", failed);
}

async function poll(taskId, key) {
  for (let i = 0; i < 600; i++) {
    const response = await fetch(`/v1/tasks/${encodeURIComponent(taskId)}`, {
      headers: { Accept: "application/json", Authorization: `Bearer ${key}` },
    });
    const task = await response.json();
    if (task.status === "succeeded" || task.status === "failed") return task;
    show(`task ${taskId}: ${task.status}…`);
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  throw new Error("the task did not finish");
}

$("#add-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const key = $("#write-key").value;
  const file = $("#add-file").files[0];
  const headers = { Accept: "application/json", Authorization: `Bearer ${key}` };
  let body;
  if (file) {
    body = new FormData();
    body.append("files", file, file.name);
  } else {
    const doc = { title: $("#add-title").value, text: $("#add-text").value };
    if ($("#add-url").value) doc.url = $("#add-url").value;
    body = JSON.stringify({ documents: [doc] });
    headers["Content-Type"] = "application/json";
  }
  show("sending…");
  try {
    const response = await fetch("/v1/documents", { method: "POST", headers, body });
    const answer = await response.json();
    if (response.status !== 202) {
      const why = (answer.errors || []).map((e) => `${e.path}: ${e.message}`).join("; ") || answer.detail || answer.title;
      show(`${response.status}: ${why}`, true);
      return;
    }
    const task = await poll(answer.taskId, key);
    const lines = task.documents.map((d) => `${d.source || d.id}: ${d.status}${d.reason ? ` (${d.reason})` : ""}`);
    show(`${task.status} — index version ${task.indexVersion || "unchanged"}\n${lines.join("\n")}`, task.status !== "succeeded");
  } catch (error) {
    show(String(error), true);
  }
});
