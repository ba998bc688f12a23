// The operator page's only script. The server renders every view; this script signs in and out,
// keeps the bearer token in this tab's session storage, and sends it in the Authorization header
// when it loads a view or sends a decision. Without a token it does nothing, so --ui-auth=none
// works with plain links.
'use strict';
(() => {
  const KEY = 'gitops-reverser.token';
  const token = () => sessionStorage.getItem(KEY);

  // show replaces the page's content with a server-rendered document.
  function show(html) {
    const doc = new DOMParser().parseFromString(html, 'text/html');
    const next = doc.getElementById('app');
    if (!next) return false;
    document.title = doc.title;
    document.getElementById('app').replaceWith(document.adoptNode(next));
    return true;
  }

  function flash(text, kind) {
    const el = document.getElementById('flash');
    if (!el) return;
    el.textContent = text;
    el.className = 'flash ' + kind;
    el.hidden = false;
  }

  // load fetches a view with the token and shows it.
  async function load(url, push) {
    const t = token();
    if (!t) return;
    let resp;
    try {
      resp = await fetch(url, { headers: { Authorization: 'Bearer ' + t }, cache: 'no-store', credentials: 'omit' });
    } catch (err) {
      flash('The page could not be reached: ' + err.message, 'error');
      return;
    }
    if (resp.status === 401) sessionStorage.removeItem(KEY);
    if (show(await resp.text()) && push) history.pushState(null, '', url);
  }

  // refreshWhile reloads the view every 2 s for up to 30 s, so the outcome of a decision shows.
  function refreshWhile(url) {
    let left = 15;
    const tick = () => {
      if (left-- <= 0 || location.href !== url) return;
      load(url, false).then(() => setTimeout(tick, 2000));
    };
    setTimeout(tick, 1000);
  }

  async function decide(form, decision) {
    const t = token();
    if (!t) return;
    const body = new URLSearchParams({ decision });
    for (const b of form.querySelectorAll('button')) b.disabled = true;
    let resp, text;
    try {
      resp = await fetch(form.action, {
        method: 'POST', body, cache: 'no-store', credentials: 'omit',
        headers: { Authorization: 'Bearer ' + t },
      });
      text = await resp.text();
    } catch (err) {
      resp = { ok: false };
      text = 'the page could not be reached: ' + err.message;
    }
    const url = location.href;
    if (!resp.ok) {
      for (const b of form.querySelectorAll('button')) b.disabled = false;
      flash(form.dataset.proposal + ': ' + text, 'error');
      return;
    }
    await load(url, false);
    flash(text, 'ok');
    refreshWhile(url);
  }

  document.addEventListener('submit', (e) => {
    const form = e.target;
    if (form.id === 'sign-in') {
      e.preventDefault();
      const value = document.getElementById('token').value.trim();
      if (!value) return;
      sessionStorage.setItem(KEY, value);
      load(location.href, false);
    } else if (form.classList.contains('decide')) {
      e.preventDefault();
      decide(form, e.submitter ? e.submitter.value : '');
    }
  });

  document.addEventListener('click', (e) => {
    if (e.target.id === 'sign-out') {
      sessionStorage.removeItem(KEY);
      location.assign('/');
      return;
    }
    const a = e.target.closest('a[data-nav]');
    if (!a || !token() || e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey) return;
    e.preventDefault();
    load(a.href, true);
  });

  window.addEventListener('popstate', () => load(location.href, false));
  if (token()) load(location.href, false);
})();
