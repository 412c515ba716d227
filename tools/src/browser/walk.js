// The page as browser_snapshot shows it, read in one call inside the
// page (in the tools' own isolated world, which the page's scripts cannot
// see or change): each element the snapshot shows, with its role, name,
// states and value, in document order with its depth. An element that gets
// a ref is given a number of this world, kept for as long as it lives
// (`find` gives it back; a removed or replaced element is not found).
// A password field's value never leaves the page: only whether it is empty.
// Open shadow roots are read in place (as laid out, slots filled), and so
// are same-origin frames; another origin's frame is an `Iframe` line.
//
// Called as `(walk)(maxDepth, maxText, interactive)`; gives
// [[depth, role, name, value, states, url, id, password], ...].
(function (maxDepth, maxText, interactive) {
  const W = globalThis.__computerMcpWorld || (globalThis.__computerMcpWorld = {
    next: 1,
    ids: new WeakMap(),
    els: new Map(),
    find(id) {
      const r = this.els.get(id);
      const e = r && r.deref();
      return e && e.isConnected ? e : null;
    },
  });
  const REF = new Set(interactive);
  const SKIP = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE', 'HEAD', 'META', 'LINK', 'TITLE', 'DATALIST']);
  // Roles whose name is their content: their text is not repeated below.
  const FROM_CONTENT = new Set(['button', 'link', 'heading', 'option', 'tab', 'menuitem',
    'menuitemcheckbox', 'menuitemradio', 'treeitem', 'cell', 'columnheader', 'rowheader',
    'switch', 'checkbox', 'radio', 'tooltip', 'caption']);
  // Elements whose text runs on with their neighbours' in a name.
  const INLINE = new Set(['A', 'ABBR', 'B', 'BDI', 'BDO', 'CITE', 'CODE', 'DATA', 'DFN', 'EM', 'I',
    'KBD', 'LABEL', 'MARK', 'Q', 'S', 'SAMP', 'SMALL', 'SPAN', 'STRONG', 'SUB', 'SUP', 'TIME', 'U', 'VAR', 'FONT']);
  const ARIA = new Set(('alert alertdialog application article banner blockquote button caption cell ' +
    'checkbox code columnheader combobox complementary contentinfo definition deletion dialog directory ' +
    'document emphasis feed figure form generic grid gridcell group heading img insertion link list ' +
    'listbox listitem log main mark marquee math menu menubar menuitem menuitemcheckbox menuitemradio ' +
    'meter navigation none note option paragraph presentation progressbar radio radiogroup region row ' +
    'rowgroup rowheader scrollbar search searchbox separator slider spinbutton status strong subscript ' +
    'superscript switch tab table tablist tabpanel term textbox time timer toolbar tooltip tree treegrid ' +
    'treeitem').split(' '));
  const LANDMARK_PARENTS = 'article, aside, main, nav, section';
  const flat = (s) => s.replace(/\s+/g, ' ').trim();
  const cut = (s) => {
    s = flat(s);
    return s.length > maxText ? Array.from(s).slice(0, maxText).join('') + '…' : s;
  };
  const out = [];

  function visible(el) {
    if (el.checkVisibility({ visibilityProperty: true })) return true;
    // Its box may be its children's alone.
    return getComputedStyle(el).display === 'contents';
  }

  function roleOf(el) {
    // The first role the page names that ARIA knows.
    for (const r of (el.getAttribute('role') || '').trim().split(/\s+/)) {
      if (ARIA.has(r)) return r === 'presentation' ? 'none' : r;
    }
    const t = el.tagName;
    switch (t) {
      case 'A': case 'AREA': return el.hasAttribute('href') ? 'link' : 'generic';
      case 'BUTTON': case 'SUMMARY': return 'button';
      case 'INPUT': {
        const ty = (el.getAttribute('type') || 'text').toLowerCase();
        if (['button', 'submit', 'reset', 'image', 'file', 'color'].includes(ty)) return 'button';
        if (ty === 'checkbox') return 'checkbox';
        if (ty === 'radio') return 'radio';
        if (ty === 'range') return 'slider';
        if (ty === 'number') return 'spinbutton';
        if (ty === 'hidden') return '';
        if (el.hasAttribute('list')) return 'combobox';
        return ty === 'search' ? 'searchbox' : 'textbox';
      }
      case 'TEXTAREA': return 'textbox';
      case 'SELECT': return el.multiple || el.size > 1 ? 'listbox' : 'combobox';
      case 'OPTION': return 'option';
      case 'OPTGROUP': case 'FIELDSET': case 'DETAILS': return 'group';
      case 'H1': case 'H2': case 'H3': case 'H4': case 'H5': case 'H6': return 'heading';
      case 'UL': case 'OL': case 'MENU': return 'list';
      case 'LI': return 'listitem';
      case 'NAV': return 'navigation';
      case 'MAIN': return 'main';
      case 'ASIDE': return 'complementary';
      case 'HEADER': return el.parentElement && el.parentElement.closest(LANDMARK_PARENTS) ? 'generic' : 'banner';
      case 'FOOTER': return el.parentElement && el.parentElement.closest(LANDMARK_PARENTS) ? 'generic' : 'contentinfo';
      case 'FORM': return el.hasAttribute('aria-label') || el.hasAttribute('aria-labelledby') ? 'form' : 'generic';
      case 'SECTION': return el.hasAttribute('aria-label') || el.hasAttribute('aria-labelledby') ? 'region' : 'generic';
      case 'ARTICLE': return 'article';
      case 'DIALOG': return 'dialog';
      case 'TABLE': return 'table';
      case 'TR': return 'row';
      case 'TD': return 'cell';
      case 'TH': return el.getAttribute('scope') === 'row' ? 'rowheader' : 'columnheader';
      case 'CAPTION': return 'caption';
      case 'IMG': return el.getAttribute('alt') === '' ? 'none' : 'img';
      case 'P': return 'paragraph';
      case 'BLOCKQUOTE': return 'blockquote';
      case 'HR': return 'separator';
      case 'FIGURE': return 'figure';
      case 'PROGRESS': return 'progressbar';
      case 'METER': return 'meter';
      case 'OUTPUT': return 'status';
      case 'IFRAME': case 'FRAME': return 'Iframe';
      case 'svg': return el.hasAttribute('aria-label') ? 'img' : '';
      default: return el.isContentEditable && !(el.parentElement && el.parentElement.isContentEditable) ? 'textbox' : 'generic';
    }
  }

  // The text an element's content gives its name.
  function textOf(node, skip) {
    if (node.nodeType === 3) return node.data;
    if (node.nodeType !== 1 || node === skip || SKIP.has(node.tagName)) return '';
    const el = node;
    if (el.getAttribute('aria-hidden') === 'true') return '';
    if (el.tagName === 'SELECT' || el.tagName === 'TEXTAREA' || el.tagName === 'INPUT') {
      return skip ? '' : ' ' + (el.type === 'password' ? '' : el.value || '') + ' ';
    }
    const label = el.getAttribute('aria-label');
    if (label && label.trim()) return ' ' + label + ' ';
    if (el.tagName === 'IMG') return ' ' + (el.getAttribute('alt') || '') + ' ';
    if (el.tagName === 'BR') return ' ';
    if (!visible(el)) return '';
    let s = '';
    for (const c of kids(el)) s += textOf(c, skip);
    return INLINE.has(el.tagName) ? s : ' ' + s + ' ';
  }

  function byIds(el, attr) {
    const root = el.getRootNode();
    return (el.getAttribute(attr) || '').split(/\s+/).filter(Boolean)
      .map((id) => root.getElementById ? root.getElementById(id) : document.getElementById(id))
      .filter(Boolean);
  }

  const names = new Map();
  function nameOf(el, role) {
    let n = names.get(el);
    if (n === undefined) {
      n = computeName(el, role);
      names.set(el, n);
    }
    return n;
  }

  function computeName(el, role) {
    const by = byIds(el, 'aria-labelledby');
    if (by.length) return cut(by.map((e) => textOf(e, null)).join(' '));
    const aria = el.getAttribute('aria-label');
    if (aria && aria.trim()) return cut(aria);
    const t = el.tagName;
    if (t === 'INPUT' || t === 'SELECT' || t === 'TEXTAREA' || t === 'METER' || t === 'PROGRESS' || t === 'OUTPUT') {
      const ty = t === 'INPUT' ? (el.type || 'text') : '';
      if (ty === 'submit' || ty === 'reset' || ty === 'button') {
        return cut(el.value || (ty === 'submit' ? 'Submit' : ty === 'reset' ? 'Reset' : ''));
      }
      if (ty === 'image') return cut(el.alt || el.value || 'Submit');
      const labels = el.labels ? Array.from(el.labels) : [];
      const l = cut(labels.map((x) => textOf(x, el)).join(' '));
      if (l) return l;
      if (el.title) return cut(el.title);
      return cut(el.getAttribute('placeholder') || '');
    }
    if (t === 'IMG' || t === 'AREA') return cut(el.getAttribute('alt') || el.title || '');
    if (t === 'FIELDSET') {
      const lg = el.querySelector(':scope > legend');
      if (lg) return cut(textOf(lg, null));
    }
    if (t === 'FIGURE') {
      const fc = el.querySelector(':scope > figcaption');
      if (fc) return cut(textOf(fc, null));
    }
    if (t === 'TABLE' && el.caption) return cut(textOf(el.caption, null));
    if (FROM_CONTENT.has(role)) {
      const s = cut(textOf(el, null));
      if (s) return s;
    }
    return cut(el.title || '');
  }

  function kids(el) {
    if (el.shadowRoot) return el.shadowRoot.childNodes;
    if (el.tagName === 'SLOT') return el.assignedNodes({ flatten: true });
    return el.childNodes;
  }

  let active = document.activeElement;
  for (;;) {
    if (active && active.shadowRoot && active.shadowRoot.activeElement) active = active.shadowRoot.activeElement;
    else if (active && (active.tagName === 'IFRAME' || active.tagName === 'FRAME') && active.contentDocument) active = active.contentDocument.activeElement;
    else break;
  }

  function states(el, role) {
    const s = [];
    const aria = (a) => el.getAttribute(a);
    const tri = (v, word) => {
      if (v === 'true') s.push(word);
      else if (v === 'false' || v === 'mixed') s.push(word + '=' + v);
    };
    if (el.tagName === 'INPUT' && (el.type === 'checkbox' || el.type === 'radio')) {
      tri(el.indeterminate ? 'mixed' : String(el.checked), 'checked');
    } else if (['checkbox', 'radio', 'switch', 'menuitemcheckbox', 'menuitemradio'].includes(role)) {
      tri(aria('aria-checked') || 'false', 'checked');
    }
    if (aria('aria-pressed')) tri(aria('aria-pressed'), 'pressed');
    if ((el.tagName === 'OPTION' && el.selected) || aria('aria-selected') === 'true') s.push('selected');
    if (aria('aria-expanded') === 'true') s.push('expanded');
    else if (aria('aria-expanded') === 'false') s.push('expanded=false');
    if (el.tagName === 'DETAILS') s.push(el.open ? 'expanded' : 'expanded=false');
    if ((REF.has(role) || el.tagName === 'OPTION') && (el.matches(':disabled') || aria('aria-disabled') === 'true')) s.push('disabled');
    if (el.required || aria('aria-required') === 'true') s.push('required');
    if (el === active && el !== document.body) s.push('focused');
    if (role === 'heading') {
      const lv = /^H[1-6]$/.test(el.tagName) ? +el.tagName[1] : +(aria('aria-level') || 2);
      s.push('level=' + lv);
    }
    return s;
  }

  function refOf(el) {
    let id = W.ids.get(el);
    if (!id) {
      id = W.next++;
      W.ids.set(el, id);
      W.els.set(id, new WeakRef(el));
    }
    return id;
  }

  // The names a child's text would only repeat.
  function skipFor(el, name, above) {
    const skip = above.slice();
    if (name) skip.push(name);
    for (const c of kids(el)) {
      if (c.nodeType === 1 && !SKIP.has(c.tagName)) {
        const r = roleOf(c);
        if (REF.has(r)) {
          const n = nameOf(c, r);
          if (n) skip.push(n);
        }
      }
    }
    return skip;
  }

  function children(el, depth, skip, inSelect, quiet) {
    for (const c of kids(el)) node(c, depth, skip, inSelect, quiet);
  }

  function node(n, depth, skip, inSelect, quiet) {
    if (depth > maxDepth) return;
    if (n.nodeType === 3) {
      const s = cut(n.data);
      if (!s || quiet || skip.includes(s)) return;
      // Text beside text (around an inline element) is one line.
      let block = n.parentNode;
      while (block && block.nodeType === 1 && INLINE.has(block.tagName)) block = block.parentNode;
      const last = out[out.length - 1];
      if (last && last[1] === 'text' && last[0] === depth && last[8] === block) {
        last[2] = cut(last[2] + ' ' + s);
      } else {
        out.push([depth, 'text', s, '', [], '', 0, 0, block]);
      }
      return;
    }
    if (n.nodeType !== 1) return;
    const el = n;
    if (SKIP.has(el.tagName) || el.getAttribute('aria-hidden') === 'true') return;
    if (el.tagName === 'OPTION' || el.tagName === 'OPTGROUP') {
      if (!inSelect && !visible(el)) return;
    } else if (!visible(el)) {
      return;
    }
    const role = roleOf(el);
    if (!role) return;
    const name = role === 'generic' || role === 'none' ? '' : nameOf(el, role);
    if ((role === 'generic' || role === 'none' || role === 'group' && el.tagName === 'OPTGROUP' && !name) && !name) {
      children(el, depth, skipFor(el, '', skip), inSelect, quiet);
      return;
    }
    if (el.tagName === 'LABEL') {
      children(el, depth, skipFor(el, '', skip), inSelect, quiet);
      return;
    }
    const select = el.tagName === 'SELECT';
    const wantsRef = REF.has(role) && !(inSelect && role === 'option');
    const password = el.tagName === 'INPUT' && el.type === 'password';
    let value = '';
    if (select) {
      const o = el.selectedOptions && el.selectedOptions[0];
      value = o && !el.multiple ? cut(o.label || o.text) : '';
    } else if (el.tagName === 'INPUT' || el.tagName === 'TEXTAREA') {
      if (!['checkbox', 'radio', 'submit', 'reset', 'button', 'image', 'file', 'color'].includes(el.type)) {
        value = password ? (el.value ? '*' : '') : cut(el.value);
      }
    } else if (role === 'textbox' && el.isContentEditable) {
      value = cut(el.innerText || '');
    } else if (['slider', 'spinbutton', 'progressbar', 'meter'].includes(role) && el.hasAttribute('aria-valuenow')) {
      value = cut(el.getAttribute('aria-valuetext') || el.getAttribute('aria-valuenow'));
    }
    let url = '';
    if (role === 'link' && el.href) url = typeof el.href === 'string' ? el.href : el.href.baseVal || '';
    const entry = [depth, role, name, value, states(el, role), url, wantsRef ? refOf(el) : 0, password ? 1 : 0];
    out.push(entry);
    if (role === 'Iframe') {
      let doc = null;
      try { doc = el.contentDocument; } catch (e) { doc = null; }
      if (doc && doc.documentElement) children(doc.documentElement, depth + 1, [], false, false);
      return;
    }
    if (['textbox', 'searchbox', 'spinbutton', 'slider'].includes(role) || el.tagName === 'INPUT' || el.tagName === 'TEXTAREA') return;
    const start = out.length;
    children(el, depth + 1, skipFor(el, name, []), inSelect || select || role === 'combobox', quiet || (FROM_CONTENT.has(role) && name !== ''));
    // Text alone below a line is said on it.
    if (out.length > start && !value && out.slice(start).every((e) => e[1] === 'text' && e[0] === depth + 1)) {
      entry[3] = cut(out.splice(start).map((e) => e[2]).join(' '));
    }
  }

  const root = document.body || document.documentElement;
  if (root) children(root, 0, [], false, false);
  for (const e of out) e.length = 8;
  return out;
})
