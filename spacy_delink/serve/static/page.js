// The reviewer's page of `delink serve`: ask the API, draw its records as the HTML report draws them.
//
// The marks use the report's classes and data (/report.css, /report.js: colours, legend,
// tooltips, combinations that outline their phrases), so the page reads like `delink
// assess --html`. Only the fields drawn are read from a record (ngrams and combinations
// with offsets and support; a protected text and its edits), so records may grow.
// Text is only ever set as textContent: nothing from a text or a record becomes markup.
(function () {
  'use strict';
  var LEVELS = [[1, 'd1'], [2, 'd2'], [4, 'd3']];  // as the report: df 1, 2, 3-4, 5+
  var COMBINATIONS_SHOWN = 50;
  var $ = function (id) { return document.getElementById(id); };
  var last = null;  // {text, k, arity, assess, protect}
  var busy = false;  // a request is on its way

  function plural(n, word) { return n + ' ' + word + (n === 1 ? '' : 's'); }
  function level(support) {
    for (var i = 0; i < LEVELS.length; i++) { if (support <= LEVELS[i][0]) { return LEVELS[i][1]; } }
    return 'd4';
  }
  function element(tag, attributes, text) {
    var node = document.createElement(tag);
    Object.keys(attributes || {}).forEach(function (name) { node.setAttribute(name, attributes[name]); });
    if (text !== undefined) { node.textContent = text; }
    return node;
  }
  function status(message, kind) {
    var line = $('status');
    line.textContent = message;
    line.className = kind || '';
  }

  // -- the API ------------------------------------------------------------------------------
  function headers() {
    var h = {'Content-Type': 'application/json'};
    var key = $('key').value.trim();
    if (key) { h.Authorization = 'Bearer ' + key; }
    return h;
  }
  async function call(endpoint, body) {
    var response = await fetch(endpoint, {method: 'POST', headers: headers(), body: JSON.stringify(body)});
    var data = null;
    try { data = await response.json(); } catch (err) { data = null; }
    if (!response.ok) {
      var error = data && data.error ? data.error : {code: 'http_' + response.status, message: response.statusText};
      var wait = response.headers.get('Retry-After');
      throw new Error(error.message + (wait ? ' (retry in ' + wait + ' s)' : '') + ' [' + error.code + ', HTTP ' + response.status + ']');
    }
    return data.records[0];
  }
  function request() {
    return {text: $('text').value, k: parseInt($('k').value, 10), arity: parseInt($('arity').value, 10)};
  }

  // -- marks: the report's sweep over the boundaries of every span ---------------------------
  function spans(record) {
    var ngrams = (record.ngrams || []).map(function (g) { return [g.start, g.end, g.support]; });
    var keys = {}, members = [], memberTexts = [], combos = [];
    (record.combinations || []).slice(0, COMBINATIONS_SHOWN).forEach(function (combination) {
      var indices = combination.members.map(function (member) {
        var key = member.start + ':' + member.end;
        if (!(key in keys)) { keys[key] = members.length; members.push([member.start, member.end]); memberTexts.push(member.text); }
        return keys[key];
      });
      combos.push([combination.support, indices]);
    });
    var data = {g: (record.ngrams || []).map(function (g) { return [g.support, g.text]; }), m: memberTexts, c: combos};
    return {ngrams: ngrams, members: members, data: data};
  }
  function active(list, left) {
    var now = [];
    list.forEach(function (span, i) { if (span[0] <= left && left < span[1]) { now.push(i); } });
    return now;
  }
  function marked(text, marks, edits) {
    var memberCombos = {};
    marks.data.c.forEach(function (combo, c) {
      combo[1].forEach(function (i) { (memberCombos[i] = memberCombos[i] || []).push(c); });
    });
    var cuts = [0, text.length];
    [marks.ngrams, marks.members, edits].forEach(function (list) {
      list.forEach(function (span) { cuts.push(span[0], span[1]); });
    });
    cuts = cuts.filter(function (b, i) { return b >= 0 && b <= text.length && cuts.indexOf(b) === i; }).sort(function (a, b) { return a - b; });
    var box = element('div', {'class': 'text', tabindex: '0'});
    for (var i = 0; i + 1 < cuts.length; i++) {
      var left = cuts[i], piece = text.slice(left, cuts[i + 1]);
      var g = active(marks.ngrams, left), m = active(marks.members, left), e = active(edits, left);
      if (!g.length && !m.length && !e.length) { box.appendChild(document.createTextNode(piece)); continue; }
      var span = element('span', {}, piece), classes = [];
      if (g.length) {
        classes.push(level(Math.min.apply(null, g.map(function (j) { return marks.ngrams[j][2]; }))));
        span.setAttribute('data-g', g.join(' '));
      }
      if (m.length) {
        classes.push('cm');
        var combos = [];
        m.forEach(function (j) { (memberCombos[j] || []).forEach(function (c) { if (combos.indexOf(c) < 0) { combos.push(c); } }); });
        span.setAttribute('data-m', m.join(' '));
        span.setAttribute('data-c', combos.sort(function (a, b) { return a - b; }).join(' '));
      }
      if (e.length) { classes.push('e-' + edits[e[0]][2]); }
      span.className = classes.join(' ');
      box.appendChild(span);
    }
    return box;
  }

  // -- edits: replayed pass by pass, so they can be marked on both texts ----------------------
  // A segment is a piece of the current text: kept from the source (from = its source offset)
  // or inserted by a pass (kind = mask | rewrite). Each pass's offsets are into the text before it.
  function replay(source, edits) {
    var segments = [{text: source, from: 0, kind: null}];
    var passes = [];
    edits.forEach(function (edit) { if (passes.indexOf(edit.pass) < 0) { passes.push(edit.pass); } });
    passes.sort(function (a, b) { return a - b; }).forEach(function (pass) {
      edits.filter(function (edit) { return edit.pass === pass; })
        .sort(function (a, b) { return b.start - a.start; })  // right to left: earlier offsets stay valid
        .forEach(function (edit) { segments = apply(segments, edit); });
    });
    return segments;
  }
  function apply(segments, edit) {
    var out = [], position = 0, inserted = false;
    var insert = {text: edit.replacement, from: null, kind: edit.by === 'mask' ? 'mask' : 'rewrite'};
    segments.forEach(function (segment) {
      var start = position, end = position + segment.text.length;
      position = end;
      if (end <= edit.start || start >= edit.end) {
        if (start >= edit.end && !inserted) { out.push(insert); inserted = true; }
        out.push(segment);
        return;
      }
      if (start < edit.start) { out.push(piece(segment, 0, edit.start - start)); }
      if (!inserted) { out.push(insert); inserted = true; }
      if (end > edit.end) { out.push(piece(segment, edit.end - start, segment.text.length)); }
    });
    if (!inserted) { out.push(insert); }
    return out;
  }
  function piece(segment, a, b) {
    return {text: segment.text.slice(a, b), from: segment.from === null ? null : segment.from + a, kind: segment.kind};
  }
  function changes(source, segments) {
    var after = [], kept = [], position = 0;
    segments.forEach(function (segment) {
      var end = position + segment.text.length;
      if (segment.kind && end > position) { after.push([position, end, segment.kind]); }
      if (segment.from !== null && segment.text.length) { kept.push([segment.from, segment.from + segment.text.length]); }
      position = end;
    });
    var before = [], cursor = 0;
    kept.sort(function (a, b) { return a[0] - b[0]; }).forEach(function (range) {
      if (range[0] > cursor) { before.push([cursor, range[0], 'removed']); }
      cursor = Math.max(cursor, range[1]);
    });
    if (cursor < source.length) { before.push([cursor, source.length, 'removed']); }
    return {before: before, after: after};
  }

  // -- drawing ------------------------------------------------------------------------------
  function comboList(side, record, data) {
    if (!data.c.length) { return null; }
    // The report's words (pages/markup.py: _combination_list): combinations as found, and the groups listing them.
    var counts = window.delinkRisk.combinations(record);
    var where = side === 'before' ? 'de-identified' : 'protected';
    var shown = counts.groups > data.c.length ? ' (first ' + data.c.length + ' shown)' : '';
    var details = element('details', {'class': 'combos', 'data-side': side});
    details.appendChild(element('summary', {}, counts.count.toLocaleString('en-US') + (counts.capped ? '+' : '') + ' linkable combination' +
      (counts.count === 1 ? '' : 's') + ' in the ' + where + ' text, in ' + counts.groups.toLocaleString('en-US') + ' group' + (counts.groups === 1 ? '' : 's') +
      shown + ': select one to outline its phrases'));
    var list = element('ol');
    data.c.forEach(function (combo, c) {
      var button = element('button', {type: 'button', 'class': 'combo', 'data-side': side, 'data-combo': String(c)},
        combo[1].map(function (i) { return '\u201c' + data.m[i] + '\u201d'; }).join(' + ') + ' ');
      button.appendChild(element('span', {'class': 'support'}, 'together in ' + plural(combo[0], 'document')));
      var item = element('li');
      item.appendChild(button);
      list.appendChild(item);
    });
    details.appendChild(list);
    return details;
  }
  function view(side, title, text, record, edits) {
    var marks = spans(record);
    var box = element('div', {'class': 'view ' + side, 'data-side': side});
    box.appendChild(element('h3', {}, title));
    box.appendChild(marked(text, marks, edits));
    return {node: box, data: marks.data, combos: comboList(side, record, marks.data)};
  }
  function facts(list) {
    var line = element('p', {'class': 'facts'});
    list.forEach(function (fact) {
      var item = element('span');
      item.appendChild(element('b', {}, fact[0]));
      item.appendChild(document.createTextNode(' ' + fact[1]));
      line.appendChild(item);
    });
    return line;
  }
  function draw() {
    var assessed = last.assess, protectedRecord = last.protect;
    var article = element('article', {'class': 'doc', 'data-doc': '0', id: 'doc-0'});
    var list = window.delinkRisk.facts(last.text, assessed);  // the report's facts, in its words (/report.js)
    var edits = {before: [], after: []}, note = null;
    if (protectedRecord) {
      var segments = replay(last.text, protectedRecord.edits || []);
      if (segments.map(function (s) { return s.text; }).join('') === protectedRecord.text) {
        edits = changes(last.text, segments);
      } else {
        note = 'The edits could not be replayed onto the text, so they are not marked.';
      }
      list.push(['protected', protectedRecord.protected ? 'yes' : 'no'], ['passes', String(protectedRecord.passes)],
        ['edits', String((protectedRecord.edits || []).length)]);
    }
    article.appendChild(element('h2', {}, protectedRecord ? 'De-identified and protected' : 'Document'));
    article.appendChild(facts(list));
    var views = element('div', {'class': 'views n' + (protectedRecord ? 2 : 1)});
    var before = view('before', protectedRecord ? 'De-identified' : 'Document', last.text, assessed, edits.before);
    views.appendChild(before.node);
    var data = {k: assessed.k, before: before.data};
    var after = null;
    if (protectedRecord) {
      after = view('after', 'Protected', protectedRecord.text, {}, edits.after);
      after.node.setAttribute('id', 'protected-view');
      views.appendChild(after.node);
      data.after = after.data;
    }
    article.appendChild(views);
    if (before.combos) { article.appendChild(before.combos); }
    if (note) { article.appendChild(element('p', {'class': 'note'}, note)); }
    article.__data = data;  // what /report.js reads for its tooltips and combinations
    var holder = $('document');
    holder.textContent = '';
    holder.appendChild(article);
    summary(assessed, protectedRecord);
    phrases(assessed);
    $('actions').hidden = !protectedRecord;
    $('result').hidden = false;
  }
  function summary(assessed, protectedRecord) {
    var linkable = assessed.anonymity !== null && assessed.anonymity !== undefined;
    var text = 'Assessed at k=' + assessed.k + ', arity ' + assessed.arity + ': ' + (linkable
      ? 'linkable (a phrase or combination that ' + (assessed.k === 2 ? 'singles out' : 'narrows a search to fewer than k') +
        ' documents of the original collection).'
      : 'not linkable.');
    if (protectedRecord) {
      var under = protectedRecord.protected_under || {};
      text += protectedRecord.protected
        ? ' Protected version checked at k=' + under.k + ', arity ' + under.arity + ': nothing in it links.'
        : ' The protected version did not pass the check.';
    }
    $('summary').textContent = text;
  }
  function phrases(assessed) {
    // Whole phrases, as the report lists them: distinct, the one that narrows most first, then in text order.
    var seen = {}, whole = window.delinkRisk.wholePhrases(last.text, assessed.ngrams || []).sort(function (a, b) {
      return a.support - b.support || a.start - b.start;
    }).filter(function (p) { var fresh = !Object.prototype.hasOwnProperty.call(seen, p.text); seen[p.text] = 1; return fresh; });
    var rows = $('phrase-rows');
    rows.textContent = '';
    whole.forEach(function (p) {
      var row = element('tr');
      row.appendChild(element('td', {}, '\u201c' + p.text + '\u201d'));
      row.appendChild(element('td', {}, String(p.support)));
      rows.appendChild(row);
    });
    $('phrases-title').textContent = plural(whole.length, 'linkable phrase') + ' (the documents of the original collection a search for it narrows to)';
    $('phrases').hidden = !whole.length;
  }

  // -- actions ------------------------------------------------------------------------------
  async function run(protect) {
    var body = request();
    if (!body.text.trim()) { status('Paste or drop a text first.', 'error'); $('text').focus(); return; }
    if (busy) { return; }
    busy = true;  // the buttons stay focusable (a disabled button would drop the keyboard focus)
    var buttons = [$('assess'), $('protect')];
    buttons.forEach(function (b) { b.setAttribute('aria-disabled', 'true'); });
    status(protect ? 'Protecting\u2026' : 'Assessing\u2026');
    try {
      var same = last && last.text === body.text && last.k === body.k && last.arity === body.arity;
      var assessed = same ? last.assess : await call('/v1/assess', body);
      var protectedRecord = protect ? await call('/v1/protect', body) : null;
      last = {text: body.text, k: body.k, arity: body.arity, assess: assessed, protect: protectedRecord};
      draw();
      status(protect ? 'Protected: the edits are marked on both texts.' : 'Assessed.', 'ok');
    } catch (err) {
      status(err.message, 'error');
    } finally {
      buttons.forEach(function (b) { b.removeAttribute('aria-disabled'); });
      busy = false;
    }
  }
  function save(name, type, content) {
    var url = URL.createObjectURL(new Blob([content], {type: type}));
    var link = element('a', {href: url, download: name});
    document.body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(function () { URL.revokeObjectURL(url); }, 0);
  }
  async function copy() {
    var text = last.protect.text;
    try {
      await navigator.clipboard.writeText(text);
    } catch (err) {  // no clipboard API outside secure contexts: select and copy
      var area = element('textarea', {readonly: '', 'class': 'visually-hidden'});
      area.value = text;
      document.body.appendChild(area);
      area.select();
      var copied = document.execCommand('copy');
      area.remove();
      if (!copied) { status('Copying is not allowed here; use "Download protected text".', 'error'); return; }
    }
    status('Protected text copied.', 'ok');
  }
  function loadFile(file) {
    if (!file) { return; }
    var reader = new FileReader();
    reader.onload = function () { $('text').value = reader.result; status('Loaded ' + file.name + '.', 'ok'); };
    reader.onerror = function () { status('Could not read ' + file.name + '.', 'error'); };
    reader.readAsText(file);
  }

  // -- setup --------------------------------------------------------------------------------
  $('form').addEventListener('submit', function (ev) { ev.preventDefault(); run(false); });
  $('protect').addEventListener('click', function () { run(true); });
  $('copy').addEventListener('click', copy);
  $('download-text').addEventListener('click', function () { save('protected.txt', 'text/plain;charset=utf-8', last.protect.text); });
  $('download-record').addEventListener('click', function () {
    save('protected.json', 'application/json', JSON.stringify(last.protect, null, 2) + '\n');
  });
  $('file').addEventListener('change', function () { loadFile($('file').files[0]); });
  var area = $('text');
  area.addEventListener('dragover', function (ev) { ev.preventDefault(); area.classList.add('dragging'); });
  area.addEventListener('dragleave', function () { area.classList.remove('dragging'); });
  area.addEventListener('drop', function (ev) {
    ev.preventDefault();
    area.classList.remove('dragging');
    loadFile(ev.dataTransfer.files[0]);
  });
  fetch('/v1/settings').then(function (r) { return r.json(); }).then(function (s) {
    var k = $('k');
    k.value = s.k;
    if (!s.allow_weaker) {
      k.min = s.k;
      Array.prototype.forEach.call($('arity').options, function (option) { option.disabled = +option.value < s.arity; });
    }
    $('arity').value = String(s.arity);
    $('key-field').hidden = !s.auth;
    $('limits').textContent = 'This server protects at k \u2265 ' + s.k + ' and arity \u2265 ' + s.arity +
      (s.allow_weaker ? ' (weaker settings allowed)' : '') + '; at most ' + s.max_chars.toLocaleString('en') +
      ' characters per text.' + (s.auth ? ' It needs an API key.' : '');
  }).catch(function () { status('Could not read the server settings.', 'error'); });
})();
