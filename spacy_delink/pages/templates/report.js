(function(){
  // The words and counts of a document's risk, as evaluate/assess_page.py's DocumentRisk computes them (delink serve's page
  // reads them from here): whole phrases are runs of linkable N-grams that overlap, touch or have only GAP between.
  var GAP=' \t\n\r\f\v\u00a0';
  function wholePhrases(text,ngrams){
    var chars=Array.from(text); var runs=[];  // offsets count code points, as the records do
    ngrams.slice().sort(function(a,b){return a.start-b.start||a.end-b.end;}).forEach(function(g){
      var last=runs[runs.length-1];
      var gap=last?chars.slice(last[1],g.start):null;
      if(last&&gap.every(function(c){return GAP.indexOf(c)>=0;})){last[1]=Math.max(last[1],g.end);last[2]=Math.min(last[2],g.support);}
      else{runs.push([g.start,g.end,g.support]);}
    });
    return runs.map(function(r){return {start:r[0],end:r[1],text:chars.slice(r[0],r[1]).join(''),support:r[2]};});
  }
  function combinations(record){  // found, the groups listing them, whether a cap cut the search (pages/markup.py: combination_counts)
    var listed=(record.combinations||[]).length;
    var count=record.combination_count!==undefined?record.combination_count:listed;
    var groups=record.combination_groups!==undefined?record.combination_groups:listed;
    var capped=!!record.combinations_capped;
    return {count:count,groups:groups,capped:capped,
      text:count?count.toLocaleString('en-US')+(capped?'+':'')+' in '+groups.toLocaleString('en-US')+' group'+(groups===1?'':'s'):'0'};
  }
  function facts(text,record){  // the facts of assess_page.py's DocumentRisk
    var phrases=wholePhrases(text,record.ngrams||[]); var total=Array.from(text).length; var covered=0; var seen={}; var distinct=0;
    phrases.forEach(function(p){covered+=p.end-p.start; if(!Object.prototype.hasOwnProperty.call(seen,p.text)){seen[p.text]=1;distinct++;}});
    var permille=total?Math.floor((2000*covered+total)/(2*total)):0;
    var anonymity=record.anonymity===null||record.anonymity===undefined?'not linkable':String(record.anonymity);
    return [['anonymity',anonymity],['linkable phrases',distinct.toLocaleString('en-US')],
      ['linkable combinations',combinations(record).text],['text at risk',Math.floor(permille/10)+'.'+(permille%10)+'%']];
  }
  window.delinkRisk={wholePhrases:wholePhrases,combinations:combinations,facts:facts};
  // The ranked table: sort by a column (again: the other way), find by id or phrase, show a kind of document.
  function rankedTable(){
    var table=document.getElementById('ranked'); if(!table){return;}
    var body=table.tBodies[0]; var rows=Array.prototype.slice.call(body.rows); var headers=Array.prototype.slice.call(table.tHead.rows[0].cells);
    var rankAt=headers.findIndex(function(th){return th.getAttribute('data-key')==='rank';});
    function value(row,i,numeric){
      var v=row.cells[i].getAttribute('data-sort');
      return numeric?(v===''?Infinity:parseFloat(v)):v.toLowerCase();
    }
    headers.forEach(function(th,i){
      th.querySelector('button.sort').addEventListener('click',function(){
        var numeric=th.hasAttribute('data-numeric');
        var order=th.getAttribute('aria-sort')==='ascending'?'descending':'ascending'; var sign=order==='ascending'?1:-1;
        headers.forEach(function(h){h.removeAttribute('aria-sort');}); th.setAttribute('aria-sort',order);
        rows.sort(function(a,b){
          var x=value(a,i,numeric),y=value(b,i,numeric);
          return x<y?-sign:x>y?sign:value(a,rankAt,true)-value(b,rankAt,true);
        });
        rows.forEach(function(row){body.appendChild(row);});
      });
    });
    var find=document.getElementById('filter'), show=document.getElementById('show'), shown=document.getElementById('shown');
    function filter(){
      var query=find.value.trim().toLowerCase(), kind=show.value, count=0;
      rows.forEach(function(row){
        var anonymity=row.getAttribute('data-anonymity');
        var ok=(kind==='all'||(kind==='linkable'&&anonymity!=='')||(kind==='none'&&anonymity==='')||kind===anonymity)&&
          (!query||row.textContent.toLowerCase().indexOf(query)>=0);
        row.hidden=!ok; if(ok){count++;}
      });
      shown.textContent=count.toLocaleString('en-US')+' of '+rows.length.toLocaleString('en-US')+' documents shown';
    }
    find.addEventListener('input',filter); show.addEventListener('change',filter);
  }
  rankedTable();
  function data(article){
    if(!article.__data){article.__data=JSON.parse(article.querySelector('script.doc-data').textContent);}
    return article.__data;
  }
  function plural(n,word){return n+' '+word+(n===1?'':'s');}
  function tip(span){
    var article=span.closest('article.doc'); var d=data(article);
    var side=span.closest('.view').getAttribute('data-side'); var v=d[side]; var k=d.k; var lines=[];
    (span.getAttribute('data-g')||'').split(' ').filter(Boolean).forEach(function(i){
      var g=v.g[+i]; var s=g[0];
      lines.push('\u201c'+g[1]+'\u201d occurs in '+plural(s,'document')+' of the original collection'+
        (s===1?': a search for it singles out its source.':' (fewer than k='+k+'): a search for it narrows the candidates to '+s+'.'));
    });
    var ms=(span.getAttribute('data-m')||'').split(' ').filter(Boolean);
    if(ms.length){
      var cs=(span.getAttribute('data-c')||'').split(' ').filter(Boolean);
      var m=v.m[+ms[0]];
      var first=v.c[+cs[0]];
      var others=first[1].filter(function(j){return j!==+ms[0];}).map(function(j){return '\u201c'+v.m[j]+'\u201d';});
      lines.push('\u201c'+m+'\u201d is common on its own, but belongs to '+plural(cs.length,'listed linkable combination')+
        (others.length?'; e.g. together with '+others.join(' and ')+' it occurs in '+plural(first[0],'document')+' only.':'.'));
    }
    if(span.classList.contains('e-removed')){lines.push('Changed by the protection (see the protected text).');}
    if(span.classList.contains('e-mask')){lines.push('Masked by the protection.');}
    if(span.classList.contains('e-rewrite')){lines.push('Rewritten by the protection (LLM).');}
    return lines.join('\n');
  }
  document.addEventListener('mouseover',function(ev){
    var span=ev.target.closest && ev.target.closest('.text span[data-g],.text span[data-m],.text span.e-removed,.text span.e-mask,.text span.e-rewrite');
    if(span && !span.hasAttribute('title')){span.setAttribute('title',tip(span));}
  });
  document.addEventListener('click',function(ev){
    var button=ev.target.closest && ev.target.closest('button.combo'); if(!button){return;}
    var article=button.closest('article.doc'); var side=button.getAttribute('data-side'); var c=button.getAttribute('data-combo');
    var on=!button.classList.contains('active');
    article.querySelectorAll('button.combo.active').forEach(function(b){b.classList.remove('active');});
    article.querySelectorAll('.sel').forEach(function(s){s.classList.remove('sel');});
    if(!on){return;}
    button.classList.add('active');
    article.querySelectorAll('.view[data-side="'+side+'"] span[data-c]').forEach(function(s){
      if(s.getAttribute('data-c').split(' ').indexOf(c)>=0){s.classList.add('sel');}
    });
  });
})();
