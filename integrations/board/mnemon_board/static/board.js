// The board's own script: partial updates, previews before switches, toasts with Undo.
// Server text reaches the page only through textContent, or as HTML the server escaped.
"use strict";

(function () {
  const csrf = () => document.querySelector('meta[name="csrf-token"]').content;

  async function post(url, body) {
    const response = await fetch(url, {
      method: "POST",
      headers: {
        "X-CSRF-Token": csrf(),
        "Accept": "application/json",
        "Content-Type": "application/x-www-form-urlencoded",
      },
      body: body,
      credentials: "same-origin",
    });
    let data = null;
    try {
      data = await response.json();
    } catch (error) {
      data = { ok: false, title: response.status + " " + response.statusText, lines: [] };
    }
    return { status: response.status, data: data };
  }

  function toast(data) {
    const holder = document.getElementById("toasts");
    holder.replaceChildren();
    const box = document.createElement("div");
    box.className = "toast " + (data.ok ? "ok" : "refused");
    box.setAttribute("role", "status");
    const title = document.createElement("strong");
    title.className = "toast-title";
    title.textContent = data.title || "";
    box.appendChild(title);
    if (data.lines && data.lines.length) {
      const list = document.createElement("ul");
      for (const line of data.lines) {
        const item = document.createElement("li");
        item.textContent = line;
        list.appendChild(item);
      }
      box.appendChild(list);
    }
    if (data.undo) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "undo";
      button.textContent = document.documentElement.lang === "zh" ? "撤销" : "Undo";
      button.addEventListener("click", async () => {
        button.disabled = true;
        const body = new URLSearchParams({ token: data.undo, back: location.pathname });
        const answer = await post("/undo", body);
        toast(answer.data);
        await refresh();
      });
      box.appendChild(button);
    }
    holder.appendChild(box);
  }

  async function refresh() {
    const response = await fetch(location.href, {
      headers: { "Accept": "text/html" },
      credentials: "same-origin",
    });
    const page = new DOMParser().parseFromString(await response.text(), "text/html");
    const fresh = page.getElementById("main");
    if (fresh) {
      document.getElementById("main").replaceChildren(...fresh.childNodes);
    }
    document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
  }

  function confirmFirst(html) {
    const dialog = document.getElementById("confirm");
    const body = dialog.querySelector(".confirm-body");
    body.innerHTML = html.body; // escaped by the server's templates
    dialog.querySelector(".confirm-button").hidden = !html.ok;
    return new Promise((resolve) => {
      dialog.addEventListener("close", () => resolve(dialog.returnValue === "confirm"), { once: true });
      dialog.showModal();
    });
  }

  function showErrors(form, errors) {
    const section = form.closest("section") || form;
    for (const slot of section.querySelectorAll("[data-error-for]")) {
      const key = slot.dataset.errorFor;
      slot.textContent = errors && key in errors ? errors[key] : "";
      const field = slot.closest(".field");
      if (field) {
        field.classList.toggle("invalid", Boolean(errors && key in errors));
      }
    }
  }

  async function submit(form, only) {
    const body = new URLSearchParams(new FormData(form));
    body.delete("csrf");
    if (only) {
      body.set("only", only);
    }
    if (form.dataset.preview) {
      const preview = await post(form.dataset.preview, body);
      if (preview.status !== 200) {
        toast({ ok: false, title: preview.data.error || "error", lines: [] });
        return;
      }
      const go = await confirmFirst({ body: preview.data.html, ok: preview.data.ok });
      if (!go) {
        return;
      }
    }
    const answer = await post(form.action, body);
    if (answer.data.errors) {
      showErrors(form, answer.data.errors);
      toast(answer.data);
      return;
    }
    toast(answer.data);
    if (answer.data.ok) {
      await refresh();
    }
  }

  document.addEventListener("submit", (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.hasAttribute("data-change")) {
      return;
    }
    event.preventDefault();
    submit(form, null);
  });

  document.addEventListener("change", (event) => {
    const input = event.target;
    if (!(input instanceof HTMLElement) || !input.hasAttribute("data-immediate")) {
      return;
    }
    const form = input.closest("form");
    if (!form) {
      return;
    }
    const field = input.closest("[data-field]");
    submit(form, field ? field.dataset.field : null);
  });
})();
