// The board's own script: partial updates, previews before switches, toasts with Undo.
// Server text reaches the page only through textContent, or as HTML the server escaped.
"use strict";

(function () {
  const csrf = () => document.querySelector('meta[name="csrf-token"]').content;
  // with the script running, a change is confirmed in a dialog, not by ticking a box
  document.documentElement.classList.add("js");

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
    if (data.receipt) {
      box.dataset.receipt = data.receipt;
    }
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

  // the question before a change of memory: its text is set as text, never as HTML
  function confirmText(text) {
    const dialog = document.getElementById("confirm");
    const body = dialog.querySelector(".confirm-body");
    const question = document.createElement("p");
    question.className = "confirm-question";
    question.textContent = text;
    body.replaceChildren(question);
    dialog.querySelector(".confirm-button").hidden = false;
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
    if (form.dataset.confirm !== undefined) {
      if (!(await confirmText(form.dataset.confirm))) {
        return;
      }
      body.set("confirmed", "yes");
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

  document.addEventListener("click", (event) => {
    const link = event.target instanceof Element ? event.target.closest("[data-refresh]") : null;
    if (!link) {
      return;
    }
    event.preventDefault();
    refresh();
  });

  document.addEventListener("change", (event) => {
    if (event.target instanceof HTMLSelectElement && event.target.hasAttribute("data-navigate")) {
      event.target.form.submit();
      return;
    }
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
